//! `cargo xtask gen-decorator`: reads burn-backend's op traits with `syn` and writes the
//! forwarding code of `cubecl-kernels/src/decorator/generated/forward.rs`.
//!
//! For every method of every op trait (defaults included, so that the inner backend's
//! specialised op is never replaced by Burn's generic composite) it writes
//! 1. a hook with a forwarding default body in `DecoratorOps<B>`, and
//! 2. the Burn trait method on `Decorated<B, D>`, which calls the hook.
//!
//! A decorator then implements `DecoratorOps<B>` and overrides only the hooks it changes.
//!
//! The same traits also give `transparent.rs`: `TransparentOps<A>` / `Transparent<A, D>`, a
//! decorator whose primitives and device *are* `A`'s (nothing wrapped). SparseAct uses it to sit
//! on an autodiff backend: Burn requires an autodiff backend's device to equal its inner
//! backend's, so the layer above autodiff cannot add a device of its own.

use anyhow::{Context, Result, bail};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::path::{Path, PathBuf};
use syn::visit_mut::VisitMut;
use syn::{FnArg, Item, Pat, ReturnType, TraitItem, Type};

/// The op traits of burn-backend 0.21 and the files that declare them.
const TRAITS: &[(&str, &str)] = &[
    ("FloatTensorOps", "src/backend/ops/tensor.rs"),
    ("IntTensorOps", "src/backend/ops/int_tensor.rs"),
    ("BoolTensorOps", "src/backend/ops/bool_tensor.rs"),
    ("QTensorOps", "src/backend/ops/qtensor.rs"),
    ("ModuleOps", "src/backend/ops/modules/base.rs"),
    ("ActivationOps", "src/backend/ops/activation.rs"),
    ("TransactionOps", "src/backend/ops/transaction.rs"),
];

/// Output structs of module ops: each field with how it is wrapped.
const STRUCTS: &[(&str, &[(&str, &str)])] = &[
    (
        "MaxPool1dWithIndices",
        &[("output", "FloatTensor"), ("indices", "IntTensor")],
    ),
    (
        "MaxPool2dWithIndices",
        &[("output", "FloatTensor"), ("indices", "IntTensor")],
    ),
    ("MaxPool1dBackward", &[("x_grad", "FloatTensor")]),
    ("MaxPool2dBackward", &[("x_grad", "FloatTensor")]),
    (
        "DeformConv2dBackward",
        &[
            ("x_grad", "FloatTensor"),
            ("offset_grad", "FloatTensor"),
            ("weight_grad", "FloatTensor"),
            ("mask_grad", "Option<FloatTensor>"),
            ("bias_grad", "Option<FloatTensor>"),
        ],
    ),
];

const TENSORS: &[&str] = &["FloatTensor", "IntTensor", "BoolTensor", "QuantizedTensor"];

pub const OUTPUT: &str = "cubecl-kernels/src/decorator/generated/forward.rs";
/// The transparent forwarder.
pub const TRANSPARENT: &str = "cubecl-kernels/src/decorator/generated/transparent.rs";

/// Which forwarder is generated.
#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    /// `Decorated<B, D>`: primitives wrapped with the decorator's configuration.
    Wrap,
    /// `Transparent<A, D>`: `A`'s own primitives and device.
    Transparent,
}

/// Finds burn-backend's sources through `cargo metadata`.
fn burn_backend_dir(root: &Path) -> Result<PathBuf> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    for p in meta["packages"].as_array().context("no packages")? {
        if p["name"] == "burn-backend" {
            let manifest = p["manifest_path"].as_str().context("manifest_path")?;
            return Ok(Path::new(manifest).parent().unwrap().to_path_buf());
        }
    }
    bail!("burn-backend is not in the dependency graph")
}

/// Generates the file's text.
pub fn generate(root: &Path, mode: Mode) -> Result<String> {
    let dir = burn_backend_dir(root)?;
    let mut hooks = Vec::new();
    let mut impls = Vec::new();
    let mut count = 0usize;
    for (trait_name, file) in TRAITS {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        let ast = syn::parse_file(&text)?;
        let tr = ast
            .items
            .iter()
            .find_map(|i| match i {
                Item::Trait(t) if t.ident == *trait_name => Some(t),
                _ => None,
            })
            .with_context(|| format!("{trait_name} not found in {file}"))?;
        let trait_ident = format_ident!("{}", trait_name);
        let mut methods = Vec::new();
        for item in &tr.items {
            let TraitItem::Fn(f) = item else { continue };
            if !f.sig.generics.params.is_empty() {
                bail!(
                    "{trait_name}::{} is generic: extend the generator",
                    f.sig.ident
                );
            }
            let (hook, method) = method(trait_name, f, mode)
                .with_context(|| format!("{trait_name}::{}", f.sig.ident))?;
            hooks.push(hook);
            methods.push(method);
            count += 1;
        }
        impls.push(match mode {
            Mode::Wrap => quote! {
                impl<B: Backend, D: DecoratorOps<B>> #trait_ident<Self> for Decorated<B, D> {
                    #(#methods)*
                }
            },
            Mode::Transparent => quote! {
                impl<A: Backend, D: TransparentOps<A>> #trait_ident<Self> for Transparent<A, D> {
                    #(#methods)*
                }
            },
        });
    }
    let file = if mode == Mode::Transparent {
        quote! {
            use super::{Transparent, TransparentDecoration};
            use burn_backend::ops::*;
            use burn_backend::tensor::*;
            use burn_backend::tensor::Device;
            use burn_backend::*;
            use burn_backend::quantization::*;
            use burn_std::*;
            use core::future::Future;
            use core::ops::Range;

            /// Every op of Burn's backend traits as an overridable hook whose default body calls
            /// the inner backend `A` with the same primitives.
            pub trait TransparentOps<A: Backend>: TransparentDecoration {
                #(#hooks)*
            }

            #(#impls)*
        }
    } else {
        quote! {
            use super::{Decorated, Decoration, DecoratedDevice, FloatPrimitive, Wrapped};
            use burn_backend::ops::*;
            use burn_backend::tensor::*;
            use burn_backend::tensor::Device;
            use burn_backend::*;
            use burn_backend::quantization::*;
            use burn_std::*;
            use core::future::Future;
            use core::ops::Range;

            /// Every op of Burn's backend traits as an overridable hook. The default bodies forward
            /// to the inner backend `B`, unwrapping the decorator's primitives and re-wrapping the
            /// results with the configuration of the first decorated argument. Float tensors pass
            /// through the decorator's own float primitive ([`FloatPrimitive`]).
            pub trait DecoratorOps<B: Backend>: Decoration + FloatPrimitive<B> {
                #(#hooks)*
            }

            #(#impls)*
        }
    };
    let tree: syn::File = syn::parse2(file).context("generated code does not parse")?;
    let body = prettyplease::unparse(&tree);
    Ok(format!(
        "// @generated by `cargo xtask gen-decorator` from burn-backend {ver}'s op traits \
         ({count} methods).\n// Do not edit: change the generator (xtask/src/gen_decorator.rs) \
         and run it again.\n#![allow(clippy::all, unused_imports, unused_variables, unused_mut)]\n\n{body}",
        ver = dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_start_matches("burn-backend-"),
    ))
}

/// Rewrites the inner backend `B` of a signature into `replacement`.
struct ReplaceB(Type);

impl VisitMut for ReplaceB {
    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        // `crate::x` in burn-backend is `burn_backend::x` here.
        if let Some(first) = path.segments.first_mut()
            && first.ident == "crate"
        {
            first.ident = format_ident!("burn_backend");
        }
        syn::visit_mut::visit_path_mut(self, path);
    }

    fn visit_type_mut(&mut self, ty: &mut Type) {
        if let Type::Path(tp) = ty
            && tp.qself.is_none()
        {
            let segs = &tp.path.segments;
            if segs.len() == 1 && segs[0].ident == "B" && segs[0].arguments.is_none() {
                *ty = self.0.clone();
                return;
            }
            if segs.len() == 2 && segs[0].ident == "B" {
                let assoc = &segs[1].ident;
                let rep = &self.0;
                *ty = syn::parse_quote!(<#rep as BackendTypes>::#assoc);
                return;
            }
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }
}

fn ty_str(ty: &Type) -> String {
    quote!(#ty).to_string().replace(' ', "")
}

/// The single generic argument of `Name<X>`, if `ty` is one.
fn generic_arg<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(tp) = ty else { return None };
    let last = tp.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().find_map(|a| match a {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

fn is_tensor(ty: &Type) -> bool {
    TENSORS.iter().any(|t| ty_str(ty) == format!("{t}<B>"))
}

fn is_float(ty: &Type) -> bool {
    ty_str(ty) == "FloatTensor<B>"
}

/// The inner backend's primitive of a decorated tensor `t` (floats through the decorator's
/// own float primitive, `DecoratorOps::float_inner`).
fn unwrap_expr(t: TokenStream, float: bool, op: &str) -> TokenStream {
    if float {
        quote!(Self::float_inner(#t.inner, #op))
    } else {
        quote!(#t.inner)
    }
}

fn is_device(ty: &Type) -> bool {
    let s = ty_str(ty);
    s == "Device<B>" || s == "B::Device"
}

/// How a parameter becomes the inner backend's argument, and where a configuration can be read.
struct Param {
    arg: TokenStream,
    /// `(expression, certain)`: certain expressions give `Config`, others `Option<Config>`.
    cfg: Option<(TokenStream, bool)>,
}

fn param(name: &syn::Ident, ty: &Type, mode: Mode, op: &str) -> Result<Param> {
    let n = quote!(#name);
    if mode == Mode::Transparent {
        return transparent_param(n, ty);
    }
    if is_tensor(ty) || is_device(ty) {
        return Ok(Param {
            arg: unwrap_expr(n.clone(), is_float(ty), op),
            cfg: Some((quote!(#n.config.clone()), true)),
        });
    }
    if let Type::Reference(r) = ty
        && (is_tensor(&r.elem) || is_device(&r.elem))
    {
        let arg = if is_float(&r.elem) {
            quote!(Self::float_peek(&#n.inner))
        } else {
            quote!(&#n.inner)
        };
        return Ok(Param {
            arg,
            cfg: Some((quote!(#n.config.clone()), true)),
        });
    }
    if let Some(inner) = generic_arg(ty, "Option")
        && is_tensor(inner)
    {
        let t = unwrap_expr(quote!(t), is_float(inner), op);
        return Ok(Param {
            arg: quote!(#n.map(|t| #t)),
            cfg: Some((quote!(#n.as_ref().map(|t| t.config.clone())), false)),
        });
    }
    if let Some(inner) = generic_arg(ty, "Vec")
        && is_tensor(inner)
    {
        let t = unwrap_expr(quote!(t), is_float(inner), op);
        return Ok(Param {
            arg: quote!(#n.into_iter().map(|t| #t).collect()),
            cfg: Some((quote!(#n.first().map(|t| t.config.clone())), false)),
        });
    }
    match ty_str(ty).as_str() {
        "TensorPrimitive<B>" => Ok(Param {
            arg: quote!(match #n {
                TensorPrimitive::Float(t) => TensorPrimitive::Float(Self::float_inner(t.inner, #op)),
                TensorPrimitive::QFloat(t) => TensorPrimitive::QFloat(t.inner),
            }),
            cfg: Some((
                quote!(match &#n {
                    TensorPrimitive::Float(t) => t.config.clone(),
                    TensorPrimitive::QFloat(t) => t.config.clone(),
                }),
                true,
            )),
        }),
        "QuantizationParametersPrimitive<B>" => Ok(Param {
            arg: quote!(QuantizationParametersPrimitive {
                scales: Self::float_inner(#n.scales.inner, #op)
            }),
            cfg: Some((quote!(#n.scales.config.clone()), true)),
        }),
        "TransactionPrimitive<B>" => Ok(Param {
            arg: quote!(TransactionPrimitive::<B>::new(
                #n.read_floats.into_iter().map(|t| Self::float_inner(t.inner, #op)).collect(),
                #n.read_qfloats.into_iter().map(|t| t.inner).collect(),
                #n.read_ints.into_iter().map(|t| t.inner).collect(),
                #n.read_bools.into_iter().map(|t| t.inner).collect(),
            )),
            cfg: None,
        }),
        s if mentions_b(s) && !s.starts_with("IntElem<B>") && !s.starts_with("FloatElem<B>") => {
            bail!("parameter type `{s}` mentions the backend: extend the generator")
        }
        _ => Ok(Param { arg: n, cfg: None }),
    }
}

/// A parameter of the transparent forwarder: the same value, with the few structs generic over
/// the backend rebuilt field by field (their fields already have `A`'s types).
fn transparent_param(n: TokenStream, ty: &Type) -> Result<Param> {
    let arg = match ty_str(ty).as_str() {
        "TensorPrimitive<B>" => quote!(match #n {
            TensorPrimitive::Float(t) => TensorPrimitive::Float(t),
            TensorPrimitive::QFloat(t) => TensorPrimitive::QFloat(t),
        }),
        "QuantizationParametersPrimitive<B>" => {
            quote!(QuantizationParametersPrimitive { scales: #n.scales })
        }
        "TransactionPrimitive<B>" => quote!(TransactionPrimitive::<A>::new(
            #n.read_floats,
            #n.read_qfloats,
            #n.read_ints,
            #n.read_bools,
        )),
        _ => n,
    };
    Ok(Param { arg, cfg: None })
}

fn mentions_b(s: &str) -> bool {
    s.contains("<B>") || s.contains("B::")
}

/// Expression that wraps `expr` (of the inner backend's type for `ty`), or `None` if `ty`
/// carries no backend primitive.
fn wrap(ty: &Type, expr: TokenStream, mode: Mode) -> Result<Option<TokenStream>> {
    let new = |e: TokenStream| match mode {
        Mode::Wrap => quote!(Wrapped::new(#e, __cfg.clone())),
        Mode::Transparent => e,
    };
    let new_float = |e: TokenStream| match mode {
        Mode::Wrap => quote!(Wrapped::new(Self::float_from_inner(#e), __cfg.clone())),
        Mode::Transparent => e,
    };
    if is_tensor(ty) || is_device(ty) {
        return Ok(match mode {
            Mode::Transparent => None,
            Mode::Wrap if is_float(ty) => Some(new_float(expr)),
            Mode::Wrap if is_tensor(ty) => Some(new(expr)),
            Mode::Wrap => Some(quote!(DecoratedDevice::new(#expr, __cfg.clone()))),
        });
    }
    match ty {
        Type::Tuple(t) => {
            let names: Vec<_> = (0..t.elems.len())
                .map(|i| format_ident!("__t{i}"))
                .collect();
            let mut parts = Vec::new();
            let mut any = false;
            for (e, n) in t.elems.iter().zip(&names) {
                match wrap(e, quote!(#n), mode)? {
                    Some(w) => {
                        any = true;
                        parts.push(w)
                    }
                    None => parts.push(quote!(#n)),
                }
            }
            return Ok(any.then(|| quote!({ let (#(#names),*) = #expr; (#(#parts),*) })));
        }
        Type::ImplTrait(it) => {
            // `impl Future<Output = X> + ...`
            for b in &it.bounds {
                if let syn::TypeParamBound::Trait(tb) = b
                    && let Some(seg) = tb.path.segments.last()
                    && seg.ident == "Future"
                    && let syn::PathArguments::AngleBracketed(a) = &seg.arguments
                {
                    for g in &a.args {
                        if let syn::GenericArgument::AssocType(at) = g {
                            return Ok(wrap(&at.ty, quote!(__f.await), mode)?
                                .map(|w| quote!({ let __f = #expr; async move { #w } })));
                        }
                    }
                }
            }
            return Ok(None);
        }
        _ => {}
    }
    for name in ["Vec", "Option", "Result"] {
        if let Some(inner) = generic_arg(ty, name) {
            let Some(w) = wrap(inner, quote!(__x), mode)? else {
                return Ok(None);
            };
            return Ok(Some(if name == "Vec" {
                quote!(#expr.into_iter().map(|__x| #w).collect())
            } else {
                quote!(#expr.map(|__x| #w))
            }));
        }
    }
    let s = ty_str(ty);
    if s == "TensorPrimitive<B>" {
        let (f, q) = (new_float(quote!(t)), new(quote!(t)));
        return Ok(Some(quote!(match #expr {
            TensorPrimitive::Float(t) => TensorPrimitive::Float(#f),
            TensorPrimitive::QFloat(t) => TensorPrimitive::QFloat(#q),
        })));
    }
    for (name, fields) in STRUCTS {
        if s == format!("{name}<B>") {
            let ident = format_ident!("{}", name);
            let inits = fields.iter().map(|(f, kind)| {
                let f = format_ident!("{}", f);
                let float = kind.contains("FloatTensor");
                let wrap_one = |e: TokenStream| if float { new_float(e) } else { new(e) };
                if kind.starts_with("Option") {
                    let w = wrap_one(quote!(t));
                    quote!(#f: __r.#f.map(|t| #w))
                } else {
                    let w = wrap_one(quote!(__r.#f));
                    quote!(#f: #w)
                }
            });
            return Ok(Some(quote!({ let __r = #expr; #ident { #(#inits),* } })));
        }
    }
    if mentions_b(&s) && !s.starts_with("IntElem<B>") && !s.starts_with("FloatElem<B>") {
        bail!("return type `{s}` mentions the backend: extend the generator");
    }
    Ok(None)
}

fn method(
    trait_name: &str,
    f: &syn::TraitItemFn,
    mode: Mode,
) -> Result<(TokenStream, TokenStream)> {
    let name = &f.sig.ident;
    // One intra-doc link to Burn's documentation of the op instead of a copy of it.
    let doc = match mode {
        Mode::Wrap => format!(
            " Hook of [`{trait_name}::{name}`]; by default the inner backend's op on the \
             unwrapped primitives."
        ),
        Mode::Transparent => {
            format!(" Hook of [`{trait_name}::{name}`]; by default `A`'s op.")
        }
    };
    let mut params = Vec::new();
    let mut names = Vec::new();
    for input in &f.sig.inputs {
        let FnArg::Typed(pt) = input else {
            bail!("receiver in an op trait")
        };
        let Pat::Ident(pi) = &*pt.pat else {
            bail!("pattern parameter")
        };
        params.push(param(&pi.ident, &pt.ty, mode, &name.to_string())?);
        names.push(pi.ident.clone());
    }
    let ret_ty: Option<Type> = match &f.sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, t) => Some((**t).clone()),
    };
    let args = params.iter().map(|p| &p.arg);
    let call = match mode {
        Mode::Wrap => quote!(B::#name(#(#args),*)),
        Mode::Transparent => quote!(A::#name(#(#args),*)),
    };
    let wrapped = match &ret_ty {
        Some(t) => wrap(t, quote!(__out), mode)?,
        None => None,
    };
    let body = match wrapped {
        None => quote!(#call),
        Some(w) if mode == Mode::Transparent => quote! {
            let __out = #call;
            #w
        },
        Some(w) => {
            let cfg = config_expr(&params).with_context(|| {
                format!(
                    "{trait_name}::{name}: no decorated argument to take the configuration from"
                )
            })?;
            quote! {
                let __cfg: Self::Config = #cfg;
                let __out = #call;
                #w
            }
        }
    };

    // Hook signature: the inner backend's `B` becomes `Decorated<B, Self>`.
    let mut hook_sig = f.sig.clone();
    let outer: Type = match mode {
        Mode::Wrap => syn::parse_quote!(Decorated<B, Self>),
        Mode::Transparent => syn::parse_quote!(Transparent<A, Self>),
    };
    ReplaceB(outer).visit_signature_mut(&mut hook_sig);
    strip_mut(&mut hook_sig);
    let hook = quote! {
        #[doc = #doc]
        #[allow(unused_mut)]
        #hook_sig { #body }
    };

    // Burn trait method on `Decorated<B, D>`: `B` becomes `Self`.
    let mut impl_sig = f.sig.clone();
    ReplaceB(syn::parse_quote!(Self)).visit_signature_mut(&mut impl_sig);
    strip_mut(&mut impl_sig);
    let method = quote! {
        #impl_sig { D::#name(#(#names),*) }
    };
    Ok((hook, method))
}

fn strip_mut(sig: &mut syn::Signature) {
    for input in sig.inputs.iter_mut() {
        if let FnArg::Typed(pt) = input
            && let Pat::Ident(pi) = &mut *pt.pat
        {
            pi.mutability = None;
        }
    }
}

/// The configuration of an op's result: the first decorated argument's, in parameter order.
fn config_expr(params: &[Param]) -> Option<TokenStream> {
    let mut optional = Vec::new();
    for p in params {
        match &p.cfg {
            Some((e, true)) => {
                return Some(if optional.is_empty() {
                    e.clone()
                } else {
                    quote!(None #(.or_else(|| #optional))* .unwrap_or_else(|| #e))
                });
            }
            Some((e, false)) => optional.push(e.clone()),
            None => {}
        }
    }
    (!optional.is_empty()).then(|| quote!(None #(.or_else(|| #optional))* .unwrap_or_default()))
}

/// Writes (or, with `check`, compares) the generated files.
pub fn run(root: &Path, check: bool) -> Result<()> {
    for (mode, file) in [(Mode::Wrap, OUTPUT), (Mode::Transparent, TRANSPARENT)] {
        let text = generate(root, mode)?;
        let path = root.join(file);
        if check {
            let old = std::fs::read_to_string(&path).unwrap_or_default();
            if old != text {
                bail!("{file} is out of date: run `cargo xtask gen-decorator`");
            }
            println!("{file} is up to date");
        } else {
            std::fs::write(&path, text)?;
            println!("wrote {file}");
        }
    }
    Ok(())
}
