// target: runtime/src/agent/corpus_fixture.rs
// rule: drift
// bypass (own): the worker's task handed to a child through `.envs([(K, v)])` and a const
const TASK_KEY: &str = "HERMES_KANBAN_TASK";

pub fn helper_tool(task: &str) -> std::io::Result<std::process::ExitStatus> {
    crate::identity::command("tool")
        .envs([(TASK_KEY, task), ("HERMES_KANBAN_RUN_ID", "1")])
        .status()
}
