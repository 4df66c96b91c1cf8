//! Unit tests of the reply guard: realistic good replies pass, each kind of offence is found.

use super::*;
use crate::model::ItemKind;

/// The CUTLASS 5.0.0 release with its link.
fn item() -> Item {
    let mut c = crate::testkit::candidate(ItemKind::Release, TEXT, &[]);
    let mut item = c.event.items.remove(0);
    item.title = "CUTLASS 5.0.0".into();
    item.url = URL.into();
    item
}

const URL: &str = "https://github.com/NVIDIA/cutlass/releases/tag/v5.0.0";
const TEXT: &str = "CUTLASS 5.0 is a major release. CuTe DSL is now the primary Python interface; \
    NVFP4 block-scaled GEMM reaches up to 1.6x over cuBLAS on FP4 GEMM on B200. Kernels are \
    traceable by torch.compile; tl.dot and libcudart.so are unchanged in v3.4.0 (e.g. model.py). \
    Warm cache hits take under 50 µs. TileFuse reaches 1,530 TFLOPS.";

fn sources() -> Sources {
    Sources::new(&[&item()], &[URL])
}

fn zh() -> Allowed {
    Allowed::new("zh-CN", &Locale::builtin("zh-CN"))
}

fn en() -> Allowed {
    Allowed::new("en", &Locale::builtin("en"))
}

#[test]
fn links_in_every_form_are_refused_unless_a_source() {
    let s = sources();
    for bad in [
        "详见https://evil.example/phish。",
        "See evil.com/path for details.",
        "Hosted at nvidia.com now.",
        "Read [the notes](https://evil.example/x).",
        "Read [the notes](notes.html).",
        "Visit www.evil.example today.",
        "Mirror at <https://evil.example/x>.",
        "Write to <mailto:a@evil.example>.",
        "下载地址 cutlass-mirror.cn/5.0 已上线",
        "ftp://files.evil.example/x",
        "See github.com/evil/cutlass for a fork.",
    ] {
        assert!(foreign_link(bad, &s).is_some(), "{bad}");
    }
    for good in [
        "CUTLASS 5.0 makes CuTe DSL the primary interface (v3.4.0, e.g. model.py, libcudart.so).",
        "torch.compile traces kernels; tl.dot is unchanged. Up to 1.6x.",
        "Release notes: https://github.com/NVIDIA/cutlass/releases/tag/v5.0.0.",
        "Notes at [GitHub](https://github.com/NVIDIA/cutlass/releases/tag/v5.0.0).",
        "<https://github.com/NVIDIA/cutlass/releases/tag/v5.0.0>",
        "Published on github.com.",
        "发布于 github.com/NVIDIA/cutlass/releases/tag/v5.0.0，详见说明。",
    ] {
        assert_eq!(foreign_link(good, &s), None, "{good}");
    }
}

#[test]
fn realistic_replies_name_nothing_new() {
    let s = sources();
    for good in [
        "CUTLASS 5.0 makes CuTe DSL the primary Python interface, up to 1.6x over cuBLAS on FP4 GEMM.",
        "The release matters for kernel authors: GEMM on the GPU via the DSL. Kernels are traceable by torch.compile.",
        "Watch whether TileFuse adoption grows in March.",
        "Python kernels now ship without Python: the JIT gets faster.",
    ] {
        assert_eq!(unknown_name(good, &s, &en()), None, "{good}");
    }
    for good in [
        "CUTLASS 5.0 让 CuTe DSL 成为主要 Python 接口，FP4 GEMM 最高比 cuBLAS 快 1.6 倍。",
        "TileFuse 在 B200 上达到 1,530 TFLOPS，对 LLM 推理的 GPU 内核很重要。",
        "关注 NVFP4 与 torch.compile 的集成。",
    ] {
        assert_eq!(unknown_name(good, &s, &zh()), None, "{good}");
    }
}

#[test]
fn invented_names_are_refused() {
    let s = sources();
    for (bad, name) in [
        ("CUTLASS 5.0 was built with FooBarNet.", "FooBarNet"),
        ("A release from Acme Corp for B200.", "Acme"),
        ("It beats TensorFlowX on FP4 GEMM.", "TensorFlowX"),
        ("Kernels now run on the B300 too.", "B300"),
        ("NVDA shares rose.", "NVDA"),
        ("Mainly for Blackwell GPUs.", "Blackwell"),
    ] {
        assert_eq!(unknown_name(bad, &s, &en()).as_deref(), Some(name), "{bad}");
    }
    // In Chinese text every capitalised Latin word is a name, even at the start.
    assert_eq!(
        unknown_name("Acme 公司发布了 CUTLASS 5.0。", &s, &zh()).as_deref(),
        Some("Acme")
    );
    assert_eq!(
        unknown_name("CUTLASS 5.0 与 FooBarNet 合作。", &s, &zh()).as_deref(),
        Some("FooBarNet")
    );
    // "AI" appears inside "maintain" but is no source's word; it is a common word anyway.
    assert_eq!(unknown_name("AI kernels.", &s, &en()), None);
}

/// Every `good` text passes as `language`, every `bad` one is refused.
fn scripts(language: &str, good: &[&str], bad: &[&str]) {
    for text in good {
        assert_eq!(wrong_script(text, language), None, "{language}: {text}");
    }
    for text in bad {
        assert!(wrong_script(text, language).is_some(), "{language}: {text}");
    }
}

#[test]
fn the_script_must_match_the_language() {
    scripts(
        "zh-CN",
        &[
            "CUTLASS 5.0 让 CuTe DSL 成为主要接口，FP4 GEMM 最高比 cuBLAS 快 1.6 倍；TileFuse 在 B200 上达到 1,530 TFLOPS。",
            "TileFuse 在 B200 上达到 1,530 TFLOPS",
            "CUDA 13.1 推出 cuTile Python：用三十八行 Python 写的 BF16 GEMM 达到 cuBLAS 吞吐的 91%。",
            "关注 CuTe DSL 的采用。",
            "热缓存命中耗时低于 50 µs。",
        ],
        &[
            "CUTLASS 5.0 makes CuTe DSL the primary interface, up to 1.6x over cuBLAS on FP4 GEMM.",
            "Adoption.",
            "CUTLASS 5.0 makes CuTe DSL the primary Python interface 接口。",
            "CUTLASS 5.0 делает CuTe DSL основным интерфейсом.",
            "CUTLASS 5.0 では CuTe DSL が主要なインターフェースになりました。",
        ],
    );
    scripts(
        "en",
        &[
            "CUTLASS 5.0 makes CuTe DSL the primary interface, up to 1.6x over cuBLAS; cold JIT under 50 µs.",
            "Baidu's PaddlePaddle (飞桨) adds FP8 kernels.",
            "An α-scaled epilogue.",
        ],
        &[
            "CUTLASS 5.0 让 CuTe DSL 成为主要接口，最高快 1.6 倍。",
            "CUTLASS 5.0 делает CuTe DSL основным интерфейсом.",
        ],
    );
}
