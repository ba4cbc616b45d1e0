//! The C math functions this binary calls, from the `libm` crate (a port of
//! musl's libm) instead of glibc's libm.so.6.
//!
//! Only plotting (the report's SVG charts: trigonometry) and a few statistics
//! (logarithms, powers) need them, but loading libm.so.6 alone costs every
//! command ~300-500 KiB of resident memory: the loader maps and relocates it
//! and runs its IFUNC resolvers, scattered over its text. Defined here, the
//! linker resolves every call inside the binary and `--as-needed` drops
//! libm.so.6 (the latency probe's peak RSS is compared with cyclictest's,
//! which does not load libm; docs/PERFORMANCE.md). A call to a libm function
//! missing here brings libm.so.6 back (tests/no_libm.rs fails).
//! The static build (crt-static, the guest tests) takes glibc's libm.a as before.

#![cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(target_feature = "crt-static")
))]

macro_rules! unary {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        #[doc = concat!("C `", stringify!($name), "`, from `libm::", stringify!($name), "`.")]
        #[no_mangle]
        pub extern "C" fn $name(x: $t) -> $t {
            libm::$name(x)
        }
    )*};
}

macro_rules! binary {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        #[doc = concat!("C `", stringify!($name), "`, from `libm::", stringify!($name), "`.")]
        #[no_mangle]
        pub extern "C" fn $name(x: $t, y: $t) -> $t {
            libm::$name(x, y)
        }
    )*};
}

unary! {
    sin: f64, cos: f64, tan: f64, acos: f64, asin: f64, atan: f64,
    exp: f64, exp2: f64, log: f64, log10: f64, log2: f64, cbrt: f64,
    sinf: f32, cosf: f32, tanf: f32, acosf: f32, asinf: f32, atanf: f32,
    expf: f32, exp2f: f32, logf: f32, log10f: f32, log2f: f32, cbrtf: f32,
}

binary! {
    atan2: f64, pow: f64, hypot: f64,
    atan2f: f32, powf: f32, hypotf: f32,
}

/// C `sincos`, from `libm::sincos` (LLVM merges `sin(x)` and `cos(x)` into it).
///
/// # Safety
/// `s` and `c` are valid for writing one `f64` each (as C requires).
#[no_mangle]
pub unsafe extern "C" fn sincos(x: f64, s: *mut f64, c: *mut f64) {
    let (sin, cos) = libm::sincos(x);
    // SAFETY: the caller passes two writable f64 places (sincos's C contract).
    unsafe {
        s.write(sin);
        c.write(cos);
    }
}

/// C `sincosf`, from `libm::sincosf`.
///
/// # Safety
/// `s` and `c` are valid for writing one `f32` each (as C requires).
#[no_mangle]
pub unsafe extern "C" fn sincosf(x: f32, s: *mut f32, c: *mut f32) {
    let (sin, cos) = libm::sincosf(x);
    // SAFETY: the caller passes two writable f32 places (sincosf's C contract).
    unsafe {
        s.write(sin);
        c.write(cos);
    }
}
