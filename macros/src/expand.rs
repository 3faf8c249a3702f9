//! Phase 3: emit the gated function. The body runs with the identity the gate hands out now;
//! without one it returns the fallback. The temporary holding the identity has a mixed-site name,
//! so it can never collide with the caller's names.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned};

use crate::validate::GatedFn;

pub fn expand(f: GatedFn) -> TokenStream {
    let GatedFn {
        attrs,
        vis,
        sig,
        block,
        identity_attrs,
        identity_pat,
        identity_ty,
        fallback,
        return_span,
    } = f;
    let held = Ident::new("__kanban_gated_identity", Span::mixed_site());
    let none_arm = match fallback {
        Some(expr) => quote!(#expr),
        // Spanned on the return type so a missing `Default` is reported there, with the
        // runtime's `on_unimplemented` message asking for `fallback = <expr>`.
        None => quote_spanned!(return_span=> ::kanban_runtime::identity::macro_support::fallback()),
    };
    quote! {
        #(#attrs)*
        #vis #sig {
            match ::kanban_runtime::identity::gate() {
                ::core::option::Option::Some(#held) => {
                    #(#identity_attrs)*
                    let #identity_pat: #identity_ty = &#held;
                    #block
                }
                ::core::option::Option::None => #none_arm,
            }
        }
    }
}
