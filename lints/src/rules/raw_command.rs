//! `raw-command`: a child process built outside the sanctioned builder.
//!
//! `identity::command(program)` scrubs the worker's identity from a child started in a non-owned
//! context; a `Command::new` elsewhere would hand a cron job's or a delegated child's subprocess
//! the worker's `HERMES_KANBAN_*` keys. Flags every `Command::new` (std or any other `Command`,
//! however imported or renamed) outside `runtime/src/identity/`. `dispatch::default_spawn` is no
//! exception: it starts from `identity::command` too.

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use super::{Context, FileCx, Rule};
use crate::diag::Diagnostic;
use crate::resolve::{Imports, call_path, describe_path, ends_with};

pub struct RawCommand;

const NAME: &str = "raw-command";
const FIX: &str = "build child processes with `identity::command(program)`, which removes the \
     identity keys and sets the delegated-child marker outside an owned context";

impl Rule for RawCommand {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, _cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        if file.file.in_identity() {
            return;
        }
        Scan {
            imports: &file.imports,
            path: &file.file.path,
            out,
        }
        .visit_file(&file.file.ast);
    }
}

struct Scan<'a> {
    imports: &'a Imports,
    path: &'a str,
    out: &'a mut Vec<Diagnostic>,
}

impl Scan<'_> {
    fn check_path(&mut self, path: &syn::Path, span: proc_macro2::Span) {
        let segs = self.imports.resolve(path);
        if ends_with(&segs, &["Command", "new"]) {
            self.out.push(Diagnostic::error(
                self.path,
                span,
                NAME,
                format!(
                    "{} builds a child process outside identity",
                    describe_path(path, &segs)
                ),
                FIX,
            ));
        }
    }
}

impl Visit<'_> for Scan<'_> {
    fn visit_expr_call(&mut self, c: &syn::ExprCall) {
        match call_path(c) {
            Some(path) => {
                self.check_path(path, c.span());
                for arg in &c.args {
                    self.visit_expr(arg);
                }
            }
            None => visit::visit_expr_call(self, c),
        }
    }

    // A constructor passed by path: `.map(Command::new)`.
    fn visit_expr_path(&mut self, p: &syn::ExprPath) {
        self.check_path(&p.path, p.span());
    }
}
