//! Links the unwinder statically into the binary that includes this module, when the build
//! script found that this toolchain can (`openpact_static_unwinder`): a process that loads
//! `libgcc_s.so` instead pays for its CPU-probing constructor at every start (see
//! `src/build/main.rs`). Whole archive, because the crate's own objects come first in the
//! link and do not yet ask for every unwinder symbol std needs.

#[cfg(openpact_static_unwinder)]
#[expect(
    unsafe_code,
    reason = "an empty extern block, only there to carry #[link]; nothing is declared or called"
)]
#[link(name = "gcc_eh", kind = "static", modifiers = "+whole-archive")]
unsafe extern "C" {}
