"""The Ascend 910B rows (results/published/ascend_figures.yaml: calibrated on one source, out of
sample for the other; mindformers2_figures.yaml: the second set, drawn held out before any change made
on the first's residuals, a development set since 2026-11-29; mindformers3_figures.yaml: the third,
drawn before any change made on the first two's; mindformers4_figures.yaml: the fourth, drawn from
MindFormers' later releases; mindspeed_llm_figures.yaml: the fifth, MindSpeed-LLM's table, the
calibration rows' own publisher three months later, a development set since the loss was priced
(its small models' miss led to it); modellink_readmes_figures.yaml: the sixth, ModelLink's
per-model READMEs, drawn to score that change; the third, fourth and sixth drawn held out and
development sets (relabelled 2026-12-01), each having had a change kept on it:
results/2026-11-29-amd-epyc/; ascend7_figures.yaml, ascend8_figures.yaml and ascend9_figures.yaml:
the seventh, eighth and ninth, held-out sources of results/published/fit.yaml) and the
out-of-sample rows on the new NVIDIA machines (nvidia_new_figures.yaml), priced with the profiles as
shipped; and NeMo 24.07's FP8 table on DGX H100 (nemo_perf_figures.yaml), drawn held out, a
development source since the fused kernels its rows run were found by taking two of them apart."""

import pytest
import yaml

from parsim.hardware.cluster import profile_path
from parsim.profile.published import load_figures, price

from drawn_sets import assert_drawn_as_hashed, assert_held_out_as_pinned, assert_held_out_set, file_sha256

ASCEND = load_figures("results/published/ascend_figures.yaml")
NVIDIA = load_figures("results/published/nvidia_new_figures.yaml")
SECOND = "results/published/mindformers2_figures.yaml"
ASCEND_2 = load_figures(SECOND)
THIRD = "results/published/mindformers3_figures.yaml"
ASCEND_3 = load_figures(THIRD)
FOURTH = "results/published/mindformers4_figures.yaml"
ASCEND_4 = load_figures(FOURTH)
FIFTH = "results/published/mindspeed_llm_figures.yaml"
ASCEND_5 = load_figures(FIFTH)
SIXTH = "results/published/modellink_readmes_figures.yaml"
ASCEND_6 = load_figures(SIXTH)
SEVENTH = "results/published/ascend7_figures.yaml"
ASCEND_7 = load_figures(SEVENTH)
EIGHTH = "results/published/ascend8_figures.yaml"
ASCEND_8 = load_figures(EIGHTH)
NINTH = "results/published/ascend9_figures.yaml"
ASCEND_9 = load_figures(NINTH)
# A held-out row priced 5.6x its figure (its note): beyond any recorded miss (at most 100%), so pinned
# on its own below rather than in ROWS.
UNEXPLAINED = "mf3-deepseek15-7b-s4096-900-a2"
# A row of the fifth set priced at twice its figure when drawn (+99%), at 1.79x with the loss priced
# (its note): pinned on its own too.
TWICE = "msllm-qwen2-0_5b-32k-a2-8npu"
ROWS = [f for f in ASCEND.figures + ASCEND_2.figures + ASCEND_3.figures + ASCEND_4.figures + ASCEND_5.figures
        + ASCEND_6.figures + ASCEND_7.figures + ASCEND_8.figures + ASCEND_9.figures + NVIDIA.figures
        if not f.excluded and f.id not in (UNEXPLAINED, TWICE)]
# sha256 of the second 910B set's rows as drawn (every field but a row's note and miss_within, which
# record how it priced) and of the model files they read: a changed row is a different set.  One
# correction since (2026-11-29, its note): the Qwen1.5 14B 32K row's global batch, 4 -> 8 (drawn:
# fbfd7547875d010b1220dab56a4061d830909ad502490caf58ff8d2a554973c6).
SECOND_ROWS_SHA256 = "26f9538d092ea5c5cd0bd579de8f1dad59570ffed0658d813cc25fe7bef4311d"
SECOND_MODELS_SHA256 = {
    "examples/qwen1_5/config_0_5b.json": "5e9905bafba054efb8185ab82ebfc802444fc58754df1aa8db8a76942dfce741",
    "examples/qwen1_5/config_1_8b.json": "dcf6e172bcc3d176fdb26ef4df0aaebe788e4f58464b392b97ecc3eb38a5b92b",
    "examples/qwen1_5/config_4b.json": "023cafee1c8f025de7f251f32bcfe195e0c3d8c309e14a479ffd8169fd50cf87",
    "examples/qwen1_5/config_7b.json": "c26439d84e0b3d28b63edea2b5b92b48c8b66022453c2690fa32b1ef50af8f0c",
    "examples/qwen1_5/config_14b.json": "7d307dafaf387229d262dee90aa359f1fcac316ebf30b6ae073dc1754383573c",
    "examples/qwen1_5/config_32b.json": "45b5d50494185020bbb50fc0ef50faa9d8c4c54c6b4ba20dd9d48f1bae48e44e",
    "examples/qwen1_5/config_72b.json": "93eeabc6279b144ccbdf2eb6779da10299b0f537e15d5fef02942d83e25e5aee",
}
# The same for the third 910B set (drawn on 2026-11-29 by the rule its header states).  Changed once,
# seen, on 2026-12-03 (forty-first sitting), a development set by then: Yi-34B's offset list became its
# split (the file's header; drawn as 0510efbaa1f69ffb6939ab3e378c3aba427f0aaa4a673d9f0ca7c4561296ba5a).
THIRD_ROWS_SHA256 = "4876b850dc7db3e5a8b33f758a86e05b004d22e75718e01a97cdcadc107e1c78"
THIRD_MODELS_SHA256 = {
    "examples/codellama_34b/config.json": "a9647babdbaa48b18974360004d21763095cc27e500982969581410098b61ec2",
    "examples/baichuan2_7b/config.json": "f983247b9d21a39e9b6cbcc210c3277004172397d167a9d99a91fe471a9df023",
    "examples/deepseek_coder_33b/config.json": "b961dbbec961a82df1bdc9178bc053d495f66178b9fe917ab265d6ce0a6b3349",
    "examples/deepseek_coder_7b_v1_5/config.json": "42cdcce5842e582e0c771b74520068d996c07d36205a3b0f9ae7e0913849596d",
    "examples/internlm_7b/config.json": "c859ffff6b79e48eb77971e2e10202f1e1c71791a229edf9808a4a8e669631ed",
    "examples/qwen_7b/config.json": "abe16b8307329af882385ea2232c40b4033a83e0d9a1727c9977f2f300cca986",
    "examples/qwen_14b/config.json": "3d70d50627cd4cd26a9f8243cb8e7cd326118939fb386c48687fd2605d9eb81e",
    "examples/yi_6b/config.json": "19ef523c60b5b75db1021c83be310b06c0c2660f28673429059be21dfe6d4bd4",
    "examples/yi_34b/config.json": "a1db88e511fda52baff9ddb3a537da6e856586f51e1539123ea68dfc7f21c138",
}

# The same for the fourth 910B set (drawn on 2026-11-29 from MindFormers' releases after 2388c729a).
# Changed once, seen, on 2026-12-03 (forty-first sitting), a development set by then: the two TeleChat2
# rows' offset lists became their splits (the file's header; drawn as
# 9de906c94ceb6b3fd7acdc6c69d05cf640881af6b0fce3373c9b1f3dae72a762).
FOURTH_ROWS_SHA256 = "01a721d4e96081c0ce7f3eab39d8428983d873a7f1f801e22e062ae18ecd6674"
FOURTH_MODELS_SHA256 = {
    "examples/telechat2_7b/config.json": "1b47370d076dbd84f4039953b47073549fd7ae10ed295caeb362f079c5d1c243",
    "examples/telechat2_35b/config.json": "b4e4c30b49b9105d4fb339a249eec051cf4a647d3f77b8512271959831a75e13",
    "examples/telechat2_115b/config.json": "0b04899519522a7314396db4908fcfad5e80005766a5fbf4911be2e4825ad924",
    "examples/internlm2_20b/config.json": "6d86f2d44ac5c74b42463715692cd897b75ccec4b8d98f8e0ced16da081ca4b8",
}

# The same for the fifth (MindSpeed-LLM's README at d58c5688, drawn on 2026-11-29); every model file
# its rows read, those of other sets included.  Changed once, seen, on 2026-12-02 (thirty-fifth
# sitting), a development set by then: the five rows whose scripts pass --num-layer-list took it as
# their split, and Qwen2.5-32B, excluded until then for its list, was scored (the file's header;
# drawn as bf7b2bdafaebc9a01ca96a2a94568f616294efe99afc8b0672f385c35f1aaba3).  Changed again, seen, on
# 2026-12-05 (fifty-fourth sitting): its Mistral 7B row, excluded until parsim priced sliding-window
# attention, was scored on Mistral-7B-v0.1's own config with its 4,096-token window (examples/mistral_7b,
# a Llama-shaped copy without the window until then; as b9aeee1c3b159e35dc893ca5a72a34bfba792d8e302a4ef101ef74474bfa86ad
# before).
FIFTH_ROWS_SHA256 = "08d64fb29a70091ca9f41ed5eb53124c814e5bfb3ad3013ab66b2964d532b1d9"
FIFTH_MODELS_SHA256 = {
    "examples/aquila2_34b/config.json": "d86c7c7db29e38147820164e5c422482b1220b66aa941ddb3b9adb00c850c658",
    "examples/aquila_7b/config.json": "84451ac57b1788f106bda8c41abfddab4db9f3a5b528e291e112668f5fe9fb18",
    "examples/baichuan2_7b/config.json": "f983247b9d21a39e9b6cbcc210c3277004172397d167a9d99a91fe471a9df023",
    "examples/baichuan_7b/config.json": "ab1b6e57b1e179a2e894cc6c11bf6160b597d9f1ec75441b3846ee82771dfff9",
    "examples/codellama_34b/config.json": "a9647babdbaa48b18974360004d21763095cc27e500982969581410098b61ec2",
    "examples/codeqwen1_5_7b/config.json": "b0803a22ffe5430c652a7d130ea5da5cf11365ff2b09e84e2f1e0245dc069259",
    "examples/internlm2_20b/config.json": "6d86f2d44ac5c74b42463715692cd897b75ccec4b8d98f8e0ced16da081ca4b8",
    "examples/internlm_65b/config.json": "12323ec8cf171c762088a6ae44e7843e25ac73220214a42231d0303f387b64e2",
    "examples/internlm_7b/config.json": "c859ffff6b79e48eb77971e2e10202f1e1c71791a229edf9808a4a8e669631ed",
    "examples/llama2_13b/config.json": "ca133a37bfd7c5c3354037d6f08475db7b5fa48635088ab1d081bccb68f1d035",
    "examples/llama2_70b/config.json": "1b6f50e64839120e53b97aeb219b03cfe6728af6447d68630af35fe17f747cbe",
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
    "examples/llama3_2_1b/config.json": "3fca15f76e8440ed8e39754fc0f3a727bd131b53a4ccffb46197c351ed4718c3",
    "examples/llama3_2_3b/config.json": "aa82c6b3ceece537ded4c2ca1ae8b54d47fd4d7b662ca7d265cf32b8b7bbb5c3",
    "examples/llama3_70b/config.json": "75807d84c3a1f0637db824170ffa2dcf9d73aa49d4f53656b6710b7808601fb8",
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
    "examples/llama_33b/config.json": "b57a8fb44461a7cd48fdae5073edc4f7c3267ad0c00ad75f02801683eedf4b27",
    "examples/llama_65b/config.json": "92a0af47a66cf1db3457692127fc2f483b6d94f64746d1c5acf5006ce74963ce",
    "examples/minicpm_2b/config.json": "fc6048514ea2b32dfcdc5bc5aa21bd28fb2c405884d4100c3a8c894a9f2b612f",
    "examples/mistral_7b/config.json": "6206cc248c1566bb6b1f1f21ea5d00fb53718ebe9f013ab77404561bdbd78865",
    "examples/qwen1_5/config_14b.json": "7d307dafaf387229d262dee90aa359f1fcac316ebf30b6ae073dc1754383573c",
    "examples/qwen1_5/config_1_8b.json": "dcf6e172bcc3d176fdb26ef4df0aaebe788e4f58464b392b97ecc3eb38a5b92b",
    "examples/qwen1_5/config_32b.json": "45b5d50494185020bbb50fc0ef50faa9d8c4c54c6b4ba20dd9d48f1bae48e44e",
    "examples/qwen1_5/config_4b.json": "023cafee1c8f025de7f251f32bcfe195e0c3d8c309e14a479ffd8169fd50cf87",
    "examples/qwen1_5/config_72b.json": "93eeabc6279b144ccbdf2eb6779da10299b0f537e15d5fef02942d83e25e5aee",
    "examples/qwen1_5/config_7b.json": "c26439d84e0b3d28b63edea2b5b92b48c8b66022453c2690fa32b1ef50af8f0c",
    "examples/qwen1_5_0_5b/config.json": "0b889ca6fc3f2eac71105a092def792db0077ba601325ba658da5439cc19969e",
    "examples/qwen1_5_110b/config.json": "b23ff944f384f54c6136d8060edb58c67660087ae4d2b4c875e9bb59dace01be",
    "examples/qwen2_0_5b/config.json": "b049dbff5acaae078bb5aeda32b640810f37cad767df8c5c4489a0acacfac780",
    "examples/qwen2_1_5b/config.json": "d31140417164e2166a1c322e1e38e199b19c656fa0457d81c271c436ee09cac2",
    "examples/qwen2_5_14b/config.json": "b18ac95af48e4ba10c81cc51d2199d4a6348ae2b8932dbda743aa91b47e0e262",
    "examples/qwen2_5_32b/config.json": "a4714f31c50ea423de2cf327e3d407777be283d2060e063cf54941e50d17c307",
    "examples/qwen2_5_3b/config.json": "a22daf13a20d3e6e6e0b1badc42e61048dfc1799783a77a3459e94270207937a",
    "examples/qwen2_72b/config.json": "065f77a5771d46f12168fd60b76465a52507fd0116966f30119e226e39453f31",
    "examples/qwen2_7b/config.json": "2a878ddb6833519cec00769af4d58f7e70c3769b3822a8443f3c01c76ebab75a",
    "examples/qwen_14b/config.json": "3d70d50627cd4cd26a9f8243cb8e7cd326118939fb386c48687fd2605d9eb81e",
    "examples/qwen_7b/config.json": "abe16b8307329af882385ea2232c40b4033a83e0d9a1727c9977f2f300cca986",
    "examples/yi_34b/config.json": "a1db88e511fda52baff9ddb3a537da6e856586f51e1539123ea68dfc7f21c138",
}

# The same for the sixth (ModelLink's per-model READMEs, drawn on 2026-11-29); every model file its rows read.
# Changed once, seen, on 2026-12-05 (fifty-fourth sitting), a development set by then: its Mistral 7B row
# scored, as the fifth set's (835d8cd07e766697ae366282d18f93491229a80f67cf47def0e9320b548b37e6 before).
SIXTH_ROWS_SHA256 = "c98fc39b32503041c2e5533e5e37b2d63f42453ef6cb9e7e79e3291c8062e73b"
# Every one of them is a file the fifth set also reads, with the digest recorded there.
SIXTH_MODELS_SHA256 = {m: FIFTH_MODELS_SHA256[m] for m in (
    "examples/codellama_34b/config.json",
    "examples/llama2_13b/config.json",
    "examples/llama2_70b/config.json",
    "examples/llama2_7b/config.json",
    "examples/mistral_7b/config.json",
    "examples/qwen1_5/config_14b.json",
    "examples/qwen1_5/config_1_8b.json",
    "examples/qwen1_5/config_32b.json",
    "examples/qwen1_5/config_4b.json",
    "examples/qwen1_5/config_72b.json",
    "examples/qwen1_5/config_7b.json",
    "examples/qwen1_5_0_5b/config.json",
    "examples/yi_34b/config.json",
)}


# The seventh and eighth sets (drawn 2026-11-30, held-out sources in results/published/fit.yaml), and
# each one's scored row's error when drawn (results/2026-11-30d-amd-epyc/heldout-910b-seventh.txt,
# heldout-910b-eighth.txt): pinned, so that a change that moves either is seen.
SEVENTH_ROWS_SHA256 = "70e941bcf174b454e8a13acc682873f72bdd755a8e2c454b7bcaa8144d53fbb5"
SEVENTH_MODELS_SHA256 = {
    "examples/aquila_7b/config.json": "84451ac57b1788f106bda8c41abfddab4db9f3a5b528e291e112668f5fe9fb18",
    "examples/llama2_13b/config.json": "ca133a37bfd7c5c3354037d6f08475db7b5fa48635088ab1d081bccb68f1d035",
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
}
EIGHTH_ROWS_SHA256 = "70632f8b6320ef0f740bb6d75fab391f503628bf3f8aa8bbfb1a3cf5ab4aaf0a"
EIGHTH_MODELS_SHA256 = {
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
}
NINTH_ROWS_SHA256 = "5283ff0c45ba1819f1302775abf214714a95bc42b0f881c3f4b8681950d88fa0"
NINTH_MODELS_SHA256 = {
    "examples/llama2_13b/config.json": "ca133a37bfd7c5c3354037d6f08475db7b5fa48635088ab1d081bccb68f1d035",
}


def assert_a_910b_set(drawn, rows: int, priced: int, profiles=("atlas-800t-a2", "atlas-900-a2"),
                      publisher="MindFormers"):
    """A 910B set drawn after the first (MindFormers' second, third and fourth; MindSpeed-LLM's):
    its rows and how many are priced, on the 910B profiles named, none of them a calibration row of
    atlas-900-a2 and none calibrating anything, each held to the issue's 15%, all cited to
    ``publisher``."""
    held = [f for f in drawn.figures if not f.excluded]
    assert len(drawn.figures) == rows and len(held) == priced
    assert not drawn.calibrations
    assert {f.profile for f in drawn.figures} == set(profiles)
    calibrated_on = set(ASCEND.calibration("atlas-900-a2").rows)
    assert not calibrated_on & {f.id for f in drawn.figures}
    assert all(f.tolerance == 0.15 and publisher in f.citation for f in drawn.figures)


@pytest.mark.parametrize("figure", ROWS, ids=[f.id for f in ROWS])
def test_row_within_its_tolerance_or_its_recorded_miss(figure):
    p = price(figure)
    assert abs(p.error) <= figure.held_within, (f"{figure.id}: measured {figure.measured}, predicted "
                                                f"{p.predicted:.1f} ({p.error:+.1%}), held within {figure.held_within:.0%}")


def test_the_held_out_row_parsim_cannot_explain_stays_where_it_was_drawn():
    """DeepSeek Coder 7B v1.5 on 8 PoDc NPUs at 340 tokens/s/p is 5% of the NPU's peak, where the
    card's other 4K rows run at 40-60%; priced at 5.6x its figure when drawn.  Held, scored and
    reported; pinned here so that a change that moves it is seen."""
    row = ASCEND_3.by_id(UNEXPLAINED)
    assert not row.excluded and row.measured == 340
    assert 5.0 < price(row).predicted / row.measured < 6.2


def test_the_fifth_sets_small_model_at_32k_tokens_stays_where_it_was_priced():
    """Qwen2 0.5B at 32K tokens (cp 2) was priced at twice its 11,338 tokens/s/p when drawn, the set's
    worst miss; the loss's price took it to 1.79x (its note; the small models of that table all
    price fast), fused attention priced by its heads of 64 to 1.57x (2026-12-01,
    results/2026-12-01b-intel-xeon/head-dim-heldout.txt), and the 910B's fit of 2026-12-02 (its
    memory efficiency, fused attention and HCCL overlap charge, which its context-parallel ring
    pays) to 1.50x (results/2026-12-02-amd-epyc/ascend-fit.txt), the 910B's fused attention at heads
    of 64 fitted from pto-isa's prior (attention_head_fill) to 1.42x (results/2026-12-02b-amd-epyc/
    attention-head-fill.txt).  Scored and reported; pinned so that a change that moves it is seen."""
    row = ASCEND_5.by_id(TWICE)
    assert not row.excluded and row.measured == 11338
    assert 1.36 < price(row).predicted / row.measured < 1.49


def test_the_ascend_calibration_uses_one_source_and_holds_out_the_other():
    cal = ASCEND.calibration("atlas-900-a2")
    used = {ASCEND.by_id(r).citation for r in cal.rows}
    assert len(used) == 1 and "ModelLink" in used.pop()
    held = [f for f in ASCEND.figures if not ASCEND.used_for_calibration(f)]
    assert held and all("MindFormers" in f.citation for f in held)
    assert all(f.tolerance == 0.15 for f in ASCEND.figures)                # the issue's goal for held-out rows
    assert sum(abs(price(f).error) <= f.tolerance for f in held) >= len(held) - 1


def test_the_nvidia_rows_are_fitted_on_nothing():
    assert not NVIDIA.calibrations
    for name in {f.profile for f in NVIDIA.figures}:
        raw = yaml.safe_load(open(profile_path(name)).read())
        assert "calibrated" not in raw and "fitted" not in raw, name


def test_atlas_900_a2_still_prices_its_calibration_rows_as_recorded():
    """As tests/test_published.py checks figures.yaml's calibrations: after a change to the cost
    model or the profile, rerun the command the calibrated: section names."""
    raw = yaml.safe_load(open(profile_path("atlas-900-a2")).read())
    cal = raw["calibrated"]
    wanted = ASCEND.calibration("atlas-900-a2")
    assert tuple(r["id"] for r in cal["rows"]) == wanted.rows and tuple(cal["fields"]) == wanted.fit
    assert raw["device"]["kernels"]["gemm_efficiency"] == cal["fields"]["device.kernels.gemm_efficiency"]
    assert raw["collective"]["bandwidth_efficiency"] == cal["fields"]["collective.bandwidth_efficiency"]
    for row in cal["rows"]:
        assert price(ASCEND.by_id(row["id"])).predicted == pytest.approx(row["predicted"], rel=2e-3), cal["command"]


def test_the_two_910b_bins_differ_by_the_ratio_mindformers_measured():
    """atlas-800t-a2 is atlas-900-a2 with the 910B3's peak: the same MindFormers configurations ran
    1.15x and 1.20x faster on the Atlas 900 A2 PoDc (the profiles' headers)."""
    pairs = [("mindformers-llama2-13b-900-a2", "mindformers-llama2-13b-800t-a2"),
             ("mindformers-llama2-70b-32p-900-a2", "mindformers-llama2-70b-32p-800t-a2")]
    for fast, slow in pairs:
        measured = ASCEND.by_id(fast).measured / ASCEND.by_id(slow).measured
        predicted = price(ASCEND.by_id(fast)).predicted / price(ASCEND.by_id(slow)).predicted
        assert 1.1 < measured < 1.25 and 1.1 < predicted < 1.25


def test_the_second_910b_set_is_the_set_drawn():
    """Eleven rows of MindFormers' Qwen1.5 and Llama 3.1 cards, ten priced, on no profile calibrated
    on them, with the model files they were drawn with."""
    assert_drawn_as_hashed(SECOND, SECOND_ROWS_SHA256, SECOND_MODELS_SHA256)
    assert_a_910b_set(ASCEND_2, rows=11, priced=10)


def test_the_third_910b_set_is_the_set_drawn_its_hashes():
    """Thirteen rows of the MindFormers cards commit 2388c729a changed, whose models are Llama's, eleven
    priced, on no profile calibrated on them, with the model files they were drawn with; every model
    file the set reads is hashed."""
    assert_drawn_as_hashed(THIRD, THIRD_ROWS_SHA256, THIRD_MODELS_SHA256, ASCEND_3)
    assert_a_910b_set(ASCEND_3, rows=13, priced=11)
    assert all(f.id.startswith("mf3-") for f in ASCEND_3.figures)


def test_the_fourth_910b_set_is_the_set_drawn_its_hashes():
    """Four rows of the TeleChat2 and InternLM2 cards of MindFormers' releases after 2388c729a, all
    priced, all on the Atlas 800T A2 (no PoDc row met the rule), with the model files they were
    drawn with; every model file the set reads is hashed."""
    assert_drawn_as_hashed(FOURTH, FOURTH_ROWS_SHA256, FOURTH_MODELS_SHA256, ASCEND_4)
    assert_a_910b_set(ASCEND_4, rows=4, priced=4, profiles=("atlas-800t-a2",))
    assert all(f.id.startswith("mf4-") for f in ASCEND_4.figures)
    assert not {f.id for f in ASCEND_4.figures} & {f.id for f in ASCEND.figures + ASCEND_2.figures + ASCEND_3.figures}


def test_the_fifth_910b_set_is_the_set_drawn_its_hashes():
    """MindSpeed-LLM's pre-training table (tokens/s/p on an Atlas 900 A2 PoDc, PyTorch on torch_npu):
    51 rows of Llama-architecture models, 44 priced when drawn, 45 since Qwen2.5-32B's layer list
    became its split and 46 since Mistral 7B's sliding window was priced, the five calibration
    models among them re-measured with other figures, none a
    calibration row; with the model files they were drawn with."""
    assert_drawn_as_hashed(FIFTH, FIFTH_ROWS_SHA256, FIFTH_MODELS_SHA256, ASCEND_5)
    assert_a_910b_set(ASCEND_5, rows=51, priced=46, profiles=("atlas-900-a2",), publisher="MindSpeed-LLM")
    assert all(f.id.startswith("msllm-") for f in ASCEND_5.figures)
    # the calibration models, measured again: other figures than the rows atlas-900-a2 is fitted on
    again = {"msllm-llama2-7b-a2-8npu": "modellink11-llama2-7b-a2-8npu", "msllm-llama2-13b-a2-8npu":
             "modellink11-llama2-13b-a2-8npu", "msllm-llama2-70b-a2-32npu": "modellink11-llama2-70b-a2-32npu",
             "msllm-llama3-8b-a2-8npu": "modellink11-llama3-8b-a2-8npu"}
    for new, old in again.items():
        assert ASCEND_5.by_id(new).measured != ASCEND.by_id(old).measured


def test_the_sixth_910b_set_is_the_set_drawn_its_hashes():
    """ModelLink's per-model README tables (tokens/s/p on 8-NPU 910B servers): 14 rows of
    Llama-architecture models, 13 priced when drawn and 14 since Mistral 7B's sliding window was
    priced, none a row of an earlier set at the same figure (those
    were left out by its rule); with the model files they were drawn with."""
    assert_drawn_as_hashed(SIXTH, SIXTH_ROWS_SHA256, SIXTH_MODELS_SHA256, ASCEND_6)
    assert_a_910b_set(ASCEND_6, rows=14, priced=14, profiles=("atlas-900-a2",), publisher="ModelLink")
    assert all(f.id.startswith("mlr-") for f in ASCEND_6.figures)
    earlier = {(dict(f.model)["hf"], f.measured) for s in (ASCEND, ASCEND_5) for f in s.figures}
    assert not {(dict(f.model)["hf"], f.measured) for f in ASCEND_6.figures} & earlier


@pytest.mark.parametrize("path,drawn,rows_sha256,models_sha256,rows,source,publisher,errors", [
    (SEVENTH, ASCEND_7, SEVENTH_ROWS_SHA256, SEVENTH_MODELS_SHA256, 3, "modelzoo-foundation", "ModelZoo-PyTorch",
     {"mzf-llama2-7b-fsdp-910b-8npu": -0.047}),
    (EIGHTH, ASCEND_8, EIGHTH_ROWS_SHA256, EIGHTH_MODELS_SHA256, 1, "mindspeed-core-st", "MindSpeed",
     {"msc-llama3-8b-tp8-910b-8npu": -0.064}),
    (NINTH, ASCEND_9, NINTH_ROWS_SHA256, NINTH_MODELS_SHA256, 6, "mindspore-perf-guide", "MindSpore",
     {"h9-llama2-13b-1x8-dp8-fullrc": -0.113})], ids=["seventh", "eighth", "ninth"])
def test_the_seventh_eighth_and_ninth_910b_sets_are_the_sets_drawn_held_out(path, drawn, rows_sha256, models_sha256,
                                                                             rows, source, publisher, errors):
    """Ascend ModelZoo-PyTorch's foundation READMEs (3 rows, 1 priced), MindSpeed's own documents (1
    row) and MindSpore's performance-tuning guide (6 rows, 1 priced): with the model files they were
    drawn with, held out of every fit, each scored row at its error when drawn (the seventh's since
    FSDP2's copies were priced, 2026-12-01: +3.0% when drawn, an FSDP row), then at the errors of the
    change they scored on 2026-12-02, the 910B's memory efficiency, fused attention and HCCL overlap
    charge fitted on the development sets and MC2 charged (results/2026-12-02-amd-epyc/ascend-fit.txt:
    -1.9% -> -5.3%, -6.4% -> -6.8%, -12.2% -> -12.0%), then the change they scored later that day, the
    910B's fused attention at heads of 64 fitted and the calibration rerun (results/2026-12-02b-amd-epyc/
    attention-head-fill.txt; as the shipped profiles price them: -4.7%, -6.4%, -11.3%)."""
    assert_drawn_as_hashed(path, rows_sha256, models_sha256, drawn)
    assert_a_910b_set(drawn, rows=rows, priced=len(errors), profiles=("atlas-900-a2",),
                      publisher=publisher)
    assert_held_out_as_pinned(drawn.figures, source, errors)


NEMO = "results/published/nemo_perf_figures.yaml"
# The rows as drawn (7b90483c...) with args.fused_ops: true on its Llama rows, added when the source
# became a development source (2026-12-02, thirty-ninth sitting: the fused kernels NeMo runs).
NEMO_ROWS_SHA256 = "0b5cba0369a159aa3697d4e68b7c5f2bc03d68fce10e9398831df20ec7f3da26"
NEMO_MODELS_SHA256 = {
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
    "examples/llama2_13b/config.json": "ca133a37bfd7c5c3354037d6f08475db7b5fa48635088ab1d081bccb68f1d035",
    "examples/llama2_70b/config.json": "1b6f50e64839120e53b97aeb219b03cfe6728af6447d68630af35fe17f747cbe",
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
    "examples/llama3_70b/config.json": "75807d84c3a1f0637db824170ffa2dcf9d73aa49d4f53656b6710b7808601fb8",
    "examples/nemotron_8b/config.json": "c2836e89507a6c3549b418655929622a0ca6475c2c6c7c3b4cbdebd87cfca7b9",
    "examples/nemotron_22b/config.json": "9ef36cab232c7f41238d55b30b8bbbb7456be827e43154e8457ab1f898df00e1",
    "examples/nemotron_340b/config.json": "c5c10e80250940fd85f142f93804b2577cd5e1e592670d593cc108a4a2e71f57",
}


def test_nemos_fp8_table_is_the_set_drawn_now_a_development_source():
    """NeMo 24.07's FP8 pre-training table on DGX H100: its twelve rows as drawn (their errors when
    first priced, held out: results/2026-12-02g-amd-epyc/nemo-heldout.txt), with the model files they
    read (the GPT-3 rows build the zoo's GPT), and the fused kernels its Llama rows state; a
    development source since the model was changed for it, fitted on by every other fold."""
    from parsim.profile.loso import load_fit_spec

    drawn = load_figures(NEMO)
    assert_drawn_as_hashed(NEMO, NEMO_ROWS_SHA256, NEMO_MODELS_SHA256, drawn)
    assert {f.profile for f in drawn.figures} == {"dgx-h100", "dgx-h100-superpod"}
    llama = [f for f in drawn.figures if "llama" in f.id]
    assert len(llama) == 5 and all(dict(dict(f.model)["args"]).get("fused_ops") is True for f in llama)
    spec = load_fit_spec("results/published/fit.yaml")
    assert "nemo-perf-2407" not in spec.held_out and all(spec.fitted_on(f) for f in drawn.figures)


FLAGPERF = "results/published/flagperf_figures.yaml"
# BAAI FlagPerf's Megatron rows on H100 and H800, drawn 2026-12-03 (forty-first sitting) by a helper who
# priced nothing; the four Llama 2 rows' zero: 1 at dp 1 dropped before pricing (the file's header).
FLAGPERF_ROWS_SHA256 = "c3875182b7d8b3709cda453c0e2c3254534ae56609cf926f9c44b51066ef04a2"
FLAGPERF_MODELS_SHA256 = {
    "examples/llama2_70b/config.json": "1b6f50e64839120e53b97aeb219b03cfe6728af6447d68630af35fe17f747cbe",
    "examples/llama3_70b/config.json": "75807d84c3a1f0637db824170ffa2dcf9d73aa49d4f53656b6710b7808601fb8",
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
}


def test_flagperfs_nvidia_rows_are_the_set_drawn_held_out():
    """FlagPerf's Megatron pre-training rows (10, 9 priced: the fp32 row's precision is not stated how
    it ran), on H800 and H100, with the model files they read; held out of every fit, each scored
    row at its error when first priced (results/2026-12-03b-amd-epyc/flagperf-heldout.txt)."""
    drawn = load_figures(FLAGPERF)
    assert_drawn_as_hashed(FLAGPERF, FLAGPERF_ROWS_SHA256, FLAGPERF_MODELS_SHA256, drawn)
    assert {f.profile for f in drawn.figures} == {"hgx-h800", "dgx-h100", "dgx-h100-superpod"}
    assert_held_out_as_pinned(drawn.figures, "flagperf-nvidia", {
        "flagperf-llama2-70b-h800-32gpu-bf16-tp8pp4": +0.048, "flagperf-llama2-70b-h800-32gpu-bf16-tp4pp8": +0.010,
        "flagperf-llama2-70b-h800-32gpu-bf16-tp4pp8-gbs1024": +0.013, "flagperf-llama3-70b-h100-64gpu-bf16": +0.100,
        "flagperf-llama3-8b-h100-8gpu-bf16": +0.132, "flagperf-llama3-8b-h100-8gpu-fp8": +0.110,
        "flagperf-llama3-8b-h100-16gpu-bf16": +0.157, "flagperf-llama3-8b-h100-16gpu-fp8": +0.130,
        "flagperf-llama3-8b-h100-440gpu-bf16": +0.263})



NEMO_LAUNCHER = "results/published/nemo_launcher_figures.yaml"
# NeMo Megatron 22.08's GPT-3 rows on DGX A100, drawn 2026-12-03 (forty-fourth sitting) by a helper who
# priced nothing; the zoo GPT (model: gpt), so no model file is read.
NEMO_LAUNCHER_ROWS_SHA256 = "7241c51dce71f7b320f58d807771cf3fa10155c780a34e008fb729e24ddc6ea5"


def test_nemo_launchers_gpt3_rows_are_the_set_drawn_held_out():
    """The 5B (8-256 GPUs, the buckets under the backward) and 175B (64-1,024 GPUs, tp 8 pp 8 with
    sequence parallelism, the buckets after it: NeMo 1.11 turns Apex's overlap off there) rows,
    11 scored and the convergence row excluded; held out of every fit, each scored row at its error
    when first priced (results/2026-12-03e-amd-epyc/nemo-launcher-heldout.txt)."""
    drawn = load_figures(NEMO_LAUNCHER)
    assert_drawn_as_hashed(NEMO_LAUNCHER, NEMO_LAUNCHER_ROWS_SHA256)
    assert {dict(f.parallel).get("overlap_grad_reduce") for f in drawn.figures if "175b" in f.id} == {False}
    assert_held_out_as_pinned(drawn.figures, "nemo-launcher-2208", {
        "nemo2208-gpt3-5b-a100-8gpu": +0.094, "nemo2208-gpt3-5b-a100-16gpu": +0.105,
        "nemo2208-gpt3-5b-a100-32gpu": +0.088, "nemo2208-gpt3-5b-a100-64gpu": +0.121,
        "nemo2208-gpt3-5b-a100-128gpu": +0.054, "nemo2208-gpt3-5b-a100-256gpu": +0.170,
        "nemo2208-gpt3-175b-a100-64gpu": +0.369, "nemo2208-gpt3-175b-a100-128gpu": +0.362,
        "nemo2208-gpt3-175b-a100-256gpu": +0.356, "nemo2208-gpt3-175b-a100-512gpu": +0.332,
        "nemo2208-gpt3-175b-a100-1024gpu": +0.328})


FMS_FSDP = "results/published/fms_fsdp_figures.yaml"
# IBM's fms-fsdp README table (Llama 2 7B HSDP, 34B and 70B full sharding, on 128 A100 and 96 H100),
# drawn 2026-12-03 (forty-sixth sitting) by a helper who priced nothing, with profiles of its clusters'
# networks; its two 13B cells left out (the checkpointing interval is not stated).
FMS_FSDP_ROWS_SHA256 = "7bffc320b81ceccd1e54381c57ac507688964786f5e34c689750e8df7964c872"
FMS_FSDP_MODELS_SHA256 = {
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
    "examples/llama2_70b/config.json": "1b6f50e64839120e53b97aeb219b03cfe6728af6447d68630af35fe17f747cbe",
    "examples/codellama_34b/config.json": "a9647babdbaa48b18974360004d21763095cc27e500982969581410098b61ec2",
}


def test_fms_fsdps_rows_are_the_set_drawn_held_out_on_their_clusters_networks():
    """Six rows of plain FSDP (HSDP within a node for 7B) on IBM's clusters, whose networks are the
    README's 400 and 800 Gb/s a node, not a DGX's 8 x 200 or 8 x 400; held out of every fit, each
    row at its error when first priced (results/2026-12-03g-amd-epyc/fms-fsdp-heldout.txt)."""
    from parsim.hardware import load_cluster

    drawn = load_figures(FMS_FSDP)
    assert_drawn_as_hashed(FMS_FSDP, FMS_FSDP_ROWS_SHA256, FMS_FSDP_MODELS_SHA256, drawn)
    for name, node_bytes_per_s in (("ibm-a100-400g", 400e9 / 8), ("ibm-h100-800g", 800e9 / 8)):
        cluster = load_cluster(f"{name}:2x8")           # a node's GPUs share its network
        assert cluster.link_for("network").bandwidth_bytes_per_s * 8 == pytest.approx(node_bytes_per_s), name
    assert {dict(f.parallel).get("dp_shard") for f in drawn.figures if "-7b-" in f.id} == {8}
    assert_held_out_as_pinned(drawn.figures, "fms-fsdp", {
        "fms-llama2-7b-a100-128gpu-hsdp": +0.012, "fms-llama2-7b-h100-96gpu-hsdp": +0.140,
        "fms-llama2-34b-a100-128gpu-fullac": -0.102, "fms-llama2-34b-h100-96gpu-fullac": -0.027,
        "fms-llama2-70b-a100-128gpu-fullac": -0.149, "fms-llama2-70b-h100-96gpu-fullac": -0.050})


MOE_MODELZOO = "results/published/moe_modelzoo_figures.yaml"
# NVIDIA's Megatron MoE Model Zoo (yanring/Megatron-MoE-ModelZoo, best_practice/qwen3/readme.md at
# 798dfb503): Qwen3-235B-A22B on 256 H100 and on GB200, drawn 2026-12-04 (forty-seventh sitting) by a
# helper who priced nothing; its script comment's figure excluded on review before the first pricing.
# Rehashed 2026-12-04 (forty-ninth sitting): the excluded FSDP row's reason lost its first clause when
# parsim came to price ZeRO-3 beside ep; it stays excluded for its second (no scored row changed).
# Rehashed 2026-12-04 (fiftieth sitting): the eight long-context rows, excluded until then because their
# command recomputes Megatron's moe module, are priced with parsim's new moe mode (their recompute: none
# became moe, their exclusion was dropped, their notes say so) and scored at their first such pricing
# (results/2026-12-04d-amd-epyc/modelzoo-moe-recompute-first-priced.txt); no other row changed.
MOE_MODELZOO_ROWS_SHA256 = "6568f7bd1e338e4b21f97611f39908b8bbbc03cb4333f3e901eb87d1282dbb55"
MOE_MODELZOO_MODELS_SHA256 = {
    "examples/qwen3_235b_a22b/config.json": "e1fa82eb28205df04a1813dd4245b829f2580db5896dfcd7c6b604679909878c",
}


def test_the_moe_model_zoos_rows_are_the_set_drawn_held_out_as_first_priced():
    """Seventeen rows of Qwen3-235B-A22B as NVIDIA's MoE team ran it (expert parallelism folded
    over tp and dp, DeepEP or NCCL all-to-alls, forced balance), fourteen scored; held out of every
    fit, each scored row at its error when first priced (results/2026-12-04-amd-epyc/moe-modelzoo-heldout.txt;
    the eight long-context rows once parsim priced their MoE-block recomputation,
    results/2026-12-04d-amd-epyc/modelzoo-moe-recompute-first-priced.txt): two rows miss by more than a
    third (tp 4 with ep 8 on the H100s, MXFP8 at 128K tokens on GB200)."""
    drawn = load_figures(MOE_MODELZOO)
    assert_drawn_as_hashed(MOE_MODELZOO, MOE_MODELZOO_ROWS_SHA256, MOE_MODELZOO_MODELS_SHA256, drawn)
    assert len(drawn.figures) == 17 and all(dict(f.parallel)["ep"] > 1 for f in drawn.figures)
    assert_held_out_as_pinned(drawn.figures, "moe-modelzoo", {
        "modelzoo-qwen3-235b-a22b-h100-256gpu-deepep": -0.053,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-deepep-1f1b-overlap": +0.139,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-a2a-pp32": +0.231,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-deepep-tp4": +0.610,
        "modelzoo-qwen3-235b-a22b-gb200-256gpu-bf16": -0.039,
        "modelzoo-qwen3-235b-a22b-gb200-128gpu-mxfp8-s131072": -0.363,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s16384-cp1-forced": -0.062,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s16384-cp1-dropless": +0.065,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s32768-cp2-forced": -0.118,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s32768-cp2-dropless": -0.026,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s65536-cp4-forced": -0.183,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s65536-cp4-dropless": -0.132,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s131072-cp8-forced": -0.219,
        "modelzoo-qwen3-235b-a22b-h100-256gpu-s131072-cp8-dropless": -0.205})


ASCEND_10 = "results/published/ascend10_figures.yaml"
# Ascend ModelZoo-PyTorch's Qwen1.0 and Qwen1.5 fine-tuning READMEs (HF Trainer + DeepSpeed ZeRO-2 with
# overlap_comm false on Atlas 800T A2), drawn 2026-12-04 (forty-seventh sitting) by a helper who priced
# nothing, kept unloaded until parsim expressed ZeRO-2 without overlap (forty-eighth sitting).
ASCEND_10_ROWS_SHA256 = "798ddb31280240b756a299b8cbc4c221e7e062ca5cd538acc91fe3975fb50366"
ASCEND_10_MODELS_SHA256 = {
    "examples/qwen1_5/config_14b.json": "7d307dafaf387229d262dee90aa359f1fcac316ebf30b6ae073dc1754383573c",
    "examples/qwen1_5/config_1_8b.json": "dcf6e172bcc3d176fdb26ef4df0aaebe788e4f58464b392b97ecc3eb38a5b92b",
    "examples/qwen1_5/config_4b.json": "023cafee1c8f025de7f251f32bcfe195e0c3d8c309e14a479ffd8169fd50cf87",
    "examples/qwen1_5/config_7b.json": "c26439d84e0b3d28b63edea2b5b92b48c8b66022453c2690fa32b1ef50af8f0c",
    "examples/qwen1_5_0_5b/config.json": "0b889ca6fc3f2eac71105a092def792db0077ba601325ba658da5439cc19969e",
    "examples/qwen_14b/config.json": "3d70d50627cd4cd26a9f8243cb8e7cd326118939fb386c48687fd2605d9eb81e",
    "examples/qwen_7b/config.json": "abe16b8307329af882385ea2232c40b4033a83e0d9a1727c9977f2f300cca986",
}


def test_the_910bs_tenth_set_is_the_set_drawn_held_out_as_first_priced():
    """Eight rows of DeepSpeed ZeRO-2 fine-tuning on Atlas 800T A2, its gradients reduce-scattered
    on the compute stream (overlap_comm false), three scored (the Qwen1.5 rows save checkpoints inside
    the timed run); held out of every fit, each scored row at its error when first priced
    (results/2026-12-04b-amd-epyc/ascend10-heldout.txt): 14B on two servers misses by two thirds."""
    drawn = load_figures(ASCEND_10)
    assert_drawn_as_hashed(ASCEND_10, ASCEND_10_ROWS_SHA256, ASCEND_10_MODELS_SHA256, drawn)
    assert len(drawn.figures) == 8
    assert all(dict(f.parallel)["zero"] == 2 and dict(f.parallel)["overlap_grad_reduce"] is False for f in drawn.figures)
    assert_held_out_as_pinned(drawn.figures, "ascend-910b-10", {
        "mzf10-qwen-1_8b-chat-ft-800ta2-8npu": +0.079,
        "mzf10-qwen-7b-chat-ft-800ta2-8npu": +0.154,
        "mzf10-qwen-14b-chat-ft-800ta2-16npu": -0.646})


MOE_PARALLEL_FOLDING = "results/published/moe_parallel_folding_figures.yaml"
# arXiv 2504.14960 ("MoE Parallel Folding", NVIDIA), Tables 2-5: Mixtral-8x22B, its 64-expert top-8
# variant and Llama3-8x70B on 128-1,024 H100, drawn 2026-12-04 (forty-eighth sitting) by a helper who
# priced nothing; hashed as reviewed (one row's zero 1 at dp 1 set to 0 before its price was seen).
# Its models are inline Hugging Face configs, inside the rows the hash covers.  Rehashed 2026-12-04
# (forty-ninth sitting): the 20 FSDP + EP rows' excluded reason is now the selection rule's 2(c), as the
# FSDP rows', since parsim prices ZeRO-3 beside ep (2(b) no longer applies); no scored row changed.
# Rehashed again the same sitting: rule 2(a) withdrawn (parsim reads Qwen2-57B-A14B as a mixture of
# experts), the 18 Qwen2 rows it alone excluded scored at the prices printed beside their exclusion
# (results/2026-12-04c-amd-epyc/qwen2-moe-scored.txt), the clause dropped from 15 rows other clauses exclude.
MOE_PARALLEL_FOLDING_ROWS_SHA256 = "d3a5cb3662305e14688633373c3c9d53aa06fbf291558dc08c1d6e8add94c6f9"


def test_the_parallel_folding_papers_rows_are_the_set_drawn_now_a_development_source():
    """Ninety-seven rows of Megatron-Core MoE training (attention's tp beside expert parallelism,
    folded or not), fifty-eight scored, as drawn; held out of every fit until the fifty-fifth sitting
    (their errors when first priced: results/2026-12-04b-amd-epyc/moe-parallel-folding-heldout.txt and
    results/2026-12-04c-amd-epyc/qwen2-moe-scored.txt), a development source since the local sorts were
    priced at the expert-tp group's rows on a mechanism its rows showed, kept out of every fit
    (results/published/fit.yaml's kept_out: fitted on, its misses were charged to H100's NVLink)."""
    from parsim.profile.loso import load_fit_spec

    drawn = load_figures(MOE_PARALLEL_FOLDING)
    assert_drawn_as_hashed(MOE_PARALLEL_FOLDING, MOE_PARALLEL_FOLDING_ROWS_SHA256)
    assert len(drawn.figures) == 97 and not any(isinstance(dict(f.model)["hf"], str) for f in drawn.figures)
    assert {f.source for f in drawn.figures} == {"moe-parallel-folding"}
    assert sum(not f.excluded for f in drawn.figures) == 58
    spec = load_fit_spec("results/published/fit.yaml")
    assert "moe-parallel-folding" not in spec.held_out and "moe-parallel-folding" in spec.kept_out
    assert not any(spec.fitted_on(f) or spec.held_out_row(f) for f in drawn.figures)


MEGASCALE_MOE = "results/published/megascale_moe_figures.yaml"
# arXiv 2505.11432 ("MegaScale-MoE", ByteDance Seed, EuroSys '26), Table 3: the Megatron-LM baseline
# (commit f1f03922) of an internal 352B MoE on 240-1,440 H800, drawn 2026-12-04 (fiftieth sitting) by a
# helper who priced nothing.  Its model is an inline config in its rows, so the rows' hash pins it too.
MEGASCALE_MOE_ROWS_SHA256 = "359d4a786de880c3790abfc0b5101cc170c7530be77f0799155a38e4525ebcc7"


def test_megascale_moes_rows_are_the_set_drawn_held_out_as_first_priced():
    """Ten rows of a 352B MoE (32 experts of 14,336, top-3, a shared expert inferred from the paper's
    own totals) on H800, five scored: Megatron-LM splitting every expert over tp 8 (etp 8, ep 1);
    held out of every fit, each scored row at its error when first priced, before any change
    (results/2026-12-04d-amd-epyc/megascale-moe-heldout.txt): every one priced 28-41% fast, as the
    held-out rows with tp-split experts of moe-parallel-folding and moe-modelzoo are."""
    drawn = load_figures(MEGASCALE_MOE)
    assert_drawn_as_hashed(MEGASCALE_MOE, MEGASCALE_MOE_ROWS_SHA256)
    assert len(drawn.figures) == 10
    hf = {dict(dict(f.model)["hf"])["num_experts"] for f in drawn.figures}
    assert hf == {32}
    assert {(dict(f.parallel)["tp"], dict(f.parallel)["etp"], dict(f.parallel)["ep"])
            for f in drawn.figures if not f.excluded} == {(8, 8, 1)}
    assert_held_out_as_pinned(drawn.figures, "megascale-moe", {
        "msmoe-t3-megatron-352b-h800-240gpu": +0.305,
        "msmoe-t3-megatron-352b-h800-480gpu": +0.277,
        "msmoe-t3-megatron-352b-h800-720gpu": +0.308,
        "msmoe-t3-megatron-352b-h800-960gpu": +0.345,
        "msmoe-t3-megatron-352b-h800-1440gpu": +0.407})


AUTOMODEL = "results/published/automodel_figures.yaml"
# NVIDIA NeMo AutoModel's performance summary (PyTorch FSDP2 + EP + torch pipelining, DeepEP), drawn
# 2026-12-04 (fifty-second sitting) by a helper who priced nothing, reviewed against AutoModel's code of
# the table's date and first priced in the fifty-third (its header).  Kimi K2's config is inline in its
# row, so the rows' hash pins it.
AUTOMODEL_ROWS_SHA256 = "7fe3ea2045f7da53c7b8832c12bb9021d297d87740e259d2be140a9717553322"
AUTOMODEL_MODELS_SHA256 = {
    "examples/deepseek_v3/config.json": "c7ebc78d5ceafb8185b81f629493078e2e9fe6902d1fc9e8004362806958044d",
    "examples/qwen3_30b_a3b/config.json": "98a4cf452e3d94b7b22d8ddd515a3fe028f76404529460935e26770c4ab2b094",
}


def test_automodels_rows_are_the_set_drawn_held_out_as_first_priced():
    """Four rows of MoE pre-training on H100 as AutoModel runs it (tp 1, FSDP2 beside ep, DeepEP,
    a forced-balance gate, whole-block recompute): DeepSeek-V3 on 256 and 1,024 GPUs and Kimi K2
    on 256 under torch pipelining (zero 1: FSDP2 gathers once and reduce-scatters once per schedule
    run there), Qwen3-30B-A3B on one node (zero 2); held out of every fit, each at its error when first
    priced, before any change (results/2026-12-04g-intel-xeon/automodel-heldout.txt): every one
    priced slow, by 10-31%, where the held-out rows with tp-split experts are priced fast."""
    drawn = load_figures(AUTOMODEL)
    assert_drawn_as_hashed(AUTOMODEL, AUTOMODEL_ROWS_SHA256, AUTOMODEL_MODELS_SHA256)
    assert len(drawn.figures) == 4
    assert {(dict(f.parallel)["tp"], dict(f.parallel)["zero"] if dict(f.parallel)["pp"] > 1 else None)
            for f in drawn.figures} == {(1, 1), (1, None)}
    assert {dict(dict(f.model)["training"])["grad_reduce_dtype"] for f in drawn.figures} == {"fp32"}
    assert_held_out_as_pinned(drawn.figures, "automodel-perf", {
        "amp-deepseek-v3-h100-256gpu": -0.221,
        "amp-deepseek-v3-h100-1024gpu": -0.105,
        "amp-kimi-k2-h100-256gpu": -0.157,
        "amp-qwen3-30b-a3b-h100-8gpu": -0.305})


XTUNER = "results/published/xtuner_moe_figures.yaml"
# InternLM XTuner's Megatron MoE benchmark (docs/zh_cn/benchmark/megatron_moe_benchmark.md at 253c42c9):
# Qwen3-235B-A22B on 256 H800 through Pai-Megatron-Patch, drawn 2026-12-04 (fifty-third sitting) by a
# helper who priced nothing, reviewed (its overlap labels) and first priced the same sitting.
XTUNER_ROWS_SHA256 = "c07cf33b80caaf9e7b591ca8877ae6f82614baff50b3efb0ba93ebc5353a2998"
XTUNER_MODELS_SHA256 = {
    "examples/qwen3_235b_a22b/config.json": "e1fa82eb28205df04a1813dd4245b829f2580db5896dfcd7c6b604679909878c",
}


def test_xtuners_rows_are_the_set_drawn_held_out_as_first_priced():
    """Sixteen rows of Qwen3-235B-A22B on 256 H800 with Megatron-Core, thirteen of them with tensor
    and expert parallelism together (tp 2 or 4 beside ep 8 or 32, experts whole); the unlabelled rows
    overlap nothing (the review); held out of every fit, each at its error when first priced, before
    any change (results/2026-12-04g-intel-xeon/xtuner-heldout.txt): tp 4 and 1F1B pp 8 priced fast,
    full recompute at micro-batches of 4 and 8 priced slow."""
    drawn = load_figures(XTUNER)
    assert_drawn_as_hashed(XTUNER, XTUNER_ROWS_SHA256, XTUNER_MODELS_SHA256, drawn)
    assert len(drawn.figures) == 16
    both = [f for f in drawn.figures if dict(f.parallel)["tp"] >= 2 and dict(f.parallel)["ep"] >= 2]
    assert len(both) == 13 and {dict(f.parallel)["etp"] for f in drawn.figures} == {1}
    overlapped = {f.id for f in drawn.figures if dict(f.parallel).get("overlap_grad_reduce", True)}
    assert overlapped == {"xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp8-sel-zero-overlap",
                          "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp8-sel-zero-tp-overlap"}
    assert_held_out_as_pinned(drawn.figures, "xtuner-megatron-moe-bench", {
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp32-vp3-mbs1-sel": +0.035,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp4-ep8-pp8-vp4-mbs1": +0.657,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep32-pp8-vp4-sel": +0.182,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep32-deepep-pp8-vp4-sel": +0.216,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp8-sel": +0.364,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp8-sel-zero-overlap": +0.474,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp8-sel-zero-tp-overlap": +0.462,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp32-vp3-mbs4-full": -0.204,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp2-ep8-pp32-mbs4-full": -0.164,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp1-ep8-pp32-vp3-mbs1-moe": -0.058,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp1-ep8-pp32-vp3-mbs4-full": -0.222,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp1-ep8-pp32-vp3-mbs8-full": -0.207,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp4-ep8-deepep-pp8-vp4-cap1": +1.373,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp4-ep8-deepep-pp8-vp4-cap2": +0.711,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp4-ep8-deepep-pp8-vp4-cap3": +0.356,
        "xtmb-qwen3-235b-a22b-h800-256gpu-tp4-ep8-deepep-pp8-vp4-cap5": +0.133})


MCORE_RELEASE = "results/published/mcore_release_figures.yaml"
# Megatron-Core v0.9.0's release-test results for its Mixtral models (NVIDIA/Megatron-LM 7b5b8b44ca), drawn
# 2026-12-05 (fifty-fourth sitting) by a helper who priced nothing, reviewed against Megatron-Core's code
# of that commit and first priced the same sitting (its header).  Mixtral 8x22B's config is inline in its
# row, so the rows' hash pins it.
MCORE_RELEASE_ROWS_SHA256 = "40ee3f8ed3ac67fcb756f9f99e83224d8e2e8fe9c9d23646e85d61f9fb48a654"
MCORE_RELEASE_MODELS_SHA256 = {
    "examples/mixtral_8x7b/config.json": "9d56d04b36d0fd12ff54ae4c5bac769cc176e254e64ff71144614b6318b40793",
}


def test_mcore_release_rows_are_the_set_drawn_held_out_as_first_priced():
    """Two rows of MoE training on H100 from Megatron-Core's own release runs, each with a GPU count
    read from its logged FLOP rate: Mixtral 8x22B on 128 GPUs with its experts split over tp 2 (etp 2,
    v0.9.0's only mode) beside ep 8 and pp 8, and Mixtral 8x7B on 64 with tp 1, an interleaved pp 4 of
    8 chunks and ep 8; held out of every fit, each at its error when first priced, before any change
    (results/2026-12-05-intel-xeon/mcore090-heldout.txt).  The third run is excluded: its GPU count
    and hardware are unstated."""
    drawn = load_figures(MCORE_RELEASE)
    assert_drawn_as_hashed(MCORE_RELEASE, MCORE_RELEASE_ROWS_SHA256, MCORE_RELEASE_MODELS_SHA256)
    assert len(drawn.figures) == 3
    layouts = {(dict(f.parallel)["tp"], dict(f.parallel)["etp"]) for f in drawn.figures if not f.excluded}
    assert layouts == {(2, 2), (1, 1)}
    assert_held_out_as_pinned(drawn.figures, "mcore-release-0.9.0", {
        "mcore090-mixtral-8x22b-h100-128gpu-tp2-pp8-ep8": +0.062,
        "mcore090-mixtral-8x7b-h100-64gpu-tp1-pp4-vp8-ep8": +0.011})


FAST_LLM = "results/published/fastllm_figures.yaml"
# ServiceNow Fast-LLM's documentation: Mistral-7B-v0.1 at 8,192 tokens with its 4,096-token window, drawn
# 2026-12-05 (fifty-fourth sitting) by a helper who priced nothing, after parsim came to price
# sliding-window attention, and first priced the same sitting (its header: the attention kernel
# corrected to FlashAttention-2 after the first pricing, both errors recorded).  Its configs are inline.
FAST_LLM_ROWS_SHA256 = "01c7f9cd97b5621af5fb4f05f816b8ef0bcd6ba925bdc1d5e0173234a4fd2549"


def test_fast_llms_rows_are_the_set_drawn_held_out_the_windows_test():
    """Three rows of Mistral 7B with its sliding window on 128 and 32 H100 and 4 A100 (data parallel,
    ZeRO-1 and -2, FlashAttention-2), drawn after sliding-window attention was priced: held out of
    every fit, each at its error as corrected (results/2026-12-05-intel-xeon/fastllm-heldout.txt), every
    scored row's attention windowed."""
    from parsim.model.attention import attention_window
    from parsim.profile.published import figure_spec

    drawn = load_figures(FAST_LLM)
    assert_drawn_as_hashed(FAST_LLM, FAST_LLM_ROWS_SHA256)
    assert len(drawn.figures) == 8
    scored = [f for f in drawn.figures if not f.excluded]
    assert {dict(dict(f.model)["training"])["attention_kernel"] for f in drawn.figures} == {"fa2"}
    assert all(attention_window(figure_spec(f).graph) == 4096 for f in scored)
    assert_held_out_as_pinned(drawn.figures, "fast-llm-docs", {
        "fastllm-mistral-7b-h100-128gpu-8k": +0.114,
        "fastllm-mistral-7b-h100-32gpu-8k-gbs32": +0.051,
        "fastllm-mistral-7b-a100-4gpu-8k-mlp-none": -0.013})


PADDLENLP = "results/published/paddlenlp_pretrain_figures.yaml"
# Baidu PaddleNLP's pre-training table (llm/docs/pretrain.rst at 3ef9c78d1): Llama 1/2, Chinese Llama 2
# derivatives and Baichuan2-7B on one node of 8 A100 80GB under Paddle's tp 2 x GroupShardedStage2, drawn
# 2026-12-05 (fifty-fifth sitting) by a helper who priced nothing, after the bands came to rest on every
# residual and to widen through a plan's mix and model: the first source to test those rules.
PADDLENLP_ROWS_SHA256 = "c5037d299af980f1462da80c0f3206b09b6ee172b327c10d19cf0a34757af3b2"
PADDLENLP_MODELS_SHA256 = {
    "examples/llama2_13b/config.json": "ca133a37bfd7c5c3354037d6f08475db7b5fa48635088ab1d081bccb68f1d035",
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
    "examples/baichuan2_7b/config.json": "f983247b9d21a39e9b6cbcc210c3277004172397d167a9d99a91fe471a9df023",
    # the excluded Qwen-7B row's
    "examples/qwen_7b/config.json": "abe16b8307329af882385ea2232c40b4033a83e0d9a1727c9977f2f300cca986",
}


def test_paddlenlps_rows_are_the_set_drawn_held_out_as_first_priced():
    """Eleven rows of PaddleNLP pre-training on 8 A100 (nine scored; Baichuan2-13B's ALiBi and Qwen-7B's
    dense mask excluded), with the model files they read; held out of every fit, each scored row at
    its error when first priced (results/2026-12-05b-intel-xeon/paddlenlp-heldout.txt): every one
    priced 11-15% fast."""
    drawn = load_figures(PADDLENLP)
    assert_drawn_as_hashed(PADDLENLP, PADDLENLP_ROWS_SHA256, PADDLENLP_MODELS_SHA256, drawn)
    assert len(drawn.figures) == 11
    assert all(dict(f.parallel)["overlap_grad_reduce"] is False for f in drawn.figures)
    assert_held_out_as_pinned(drawn.figures, "paddlenlp-pretrain", {
        "paddlenlp-flagalpha-llama2-chinese-13b-a100-8gpu-tp2sd4": +0.114,
        "paddlenlp-flagalpha-llama2-chinese-7b-a100-8gpu-tp2sd4": +0.148,
        "paddlenlp-baichuan2-7b-a100-8gpu-tp2sd4": +0.145,
        "paddlenlp-llama-13b-a100-8gpu-tp2sd4": +0.120,
        "paddlenlp-llama-7b-a100-8gpu-tp2sd4": +0.144,
        "paddlenlp-ziya-llama-13b-a100-8gpu-tp2sd4": +0.117,
        "paddlenlp-linly-chinese-llama2-7b-a100-8gpu-tp2sd4": +0.145,
        "paddlenlp-llama2-13b-a100-8gpu-tp2sd4": +0.117,
        "paddlenlp-llama2-7b-a100-8gpu-tp2sd4": +0.144})


COLOSSALAI = "results/published/colossalai_readme_figures.yaml"
# hpcaitech/ColossalAI's README benchmark table (e5fdefa6c): Llama-like 7B and 70B on H200 and B200, drawn
# 2026-12-05 (fifty-fifth sitting) by a helper who priced nothing, the second source after the bands' new
# rules; its models are inline configs, inside the rows the hash covers (hashed as reviewed: the excluded
# B200 7B row on the 2 nodes its printed layout takes).
COLOSSALAI_ROWS_SHA256 = "10fa792da9da478e04f32f9dc6ade47b2ae16161bd410f4aff78b0bca070e12a"


def test_colossalais_rows_are_the_set_drawn_held_out_as_first_priced():
    """Four rows of Colossal-AI's HybridParallelPlugin, one scored (7B under ZeRO-2 over 8 H200 with full
    checkpointing); held out of every fit, at its error when first priced
    (results/2026-12-05b-intel-xeon/colossalai-heldout.txt)."""
    drawn = load_figures(COLOSSALAI)
    assert_drawn_as_hashed(COLOSSALAI, COLOSSALAI_ROWS_SHA256)
    assert len(drawn.figures) == 4 and not any(isinstance(dict(f.model)["hf"], str) for f in drawn.figures)
    assert_held_out_as_pinned(drawn.figures, "colossalai-readme-bench", {"colossalai-llama-7b-h200-8gpu-zero2": +0.064})


BLOOM = "results/published/bloom_prequel_figures.yaml"
# BigScience's BLOOM (tr11) topology benchmarks on Jean Zay (chronicles-prequel.md at 9e64edec2), drawn
# 2026-12-05 (fifty-sixth sitting) by a helper who priced nothing; its models are inline GPT configs, inside
# the rows the hash covers (hashed as reviewed: re-pointed to hardware_profiles/jean-zay-a100.yaml, and the
# nine dp-1 rows at zero 0, before any pricing).
BLOOM_ROWS_SHA256 = "c48bcea34fd502c3f8c51f0111abced66112e54623b93d985da55cac1eb94d8e"


def test_blooms_topology_rows_are_the_set_drawn_held_out_as_first_priced():
    """137 rows of Megatron-DeepSpeed topology trials on 8-384 A100 of Jean Zay (100 scored; 37 excluded: no
    layers or heads printed, TFLOPs only, cells that contradict each other), held out of every fit, each
    scored row at its error when first priced (results/2026-12-05c-intel-xeon/bloom-heldout.txt): 95 of the
    100 priced fast, median +15%."""
    drawn = load_figures(BLOOM)
    assert_drawn_as_hashed(BLOOM, BLOOM_ROWS_SHA256, None, drawn)
    assert len(drawn.figures) == 137
    assert {f.profile for f in drawn.figures} == {"jean-zay-a100"}
    assert_held_out_as_pinned(drawn.figures, "bigscience-tr11-prequel", BLOOM_FIRST_PRICED)


# each scored BLOOM row's throughput error when first priced (results/2026-12-05c-intel-xeon/bloom-heldout.txt)
BLOOM_FIRST_PRICED = {
    "bloom-pre-l389-h14400-l8-a32-dp1tp8pp1-mbs1-gbs2048-fp16": +0.400,
    "bloom-pre-l390-h14400-l80-a96-dp1tp8pp10-mbs1-gbs2048-fp16": +0.566,
    "bloom-pre-l391-h14400-l80-a96-dp2tp8pp10-mbs1-gbs2048-fp16": +0.582,
    "bloom-pre-l427-h14400-l8-a32-dp1tp8pp1-mbs1-gbs2048-bf16": +0.413,
    "bloom-pre-l428-h14400-l80-a96-dp1tp8pp10-mbs1-gbs2048-bf16": +0.583,
    "bloom-pre-l429-h14400-l80-a96-dp2tp8pp10-mbs1-gbs2048-bf16": +0.596,
    "bloom-pre-l607-h14336-l72-a64-dp4tp8pp12-mbs1-gbs2048-fp16": +0.339,
    "bloom-pre-l608-h14336-l72-a64-dp4tp8pp12-mbs2-gbs2048-fp16": +0.247,
    "bloom-pre-l609-h14336-l72-a64-dp4tp8pp12-mbs4-gbs2048-fp16": +0.116,
    "bloom-pre-l610-h14336-l72-a64-dp4tp8pp12-mbs8-gbs2048-fp16": +0.092,
    "bloom-pre-l615-h14336-l72-a64-dp8tp8pp6-mbs1-gbs2048-fp16": +0.411,
    "bloom-pre-l616-h14336-l72-a64-dp8tp8pp6-mbs2-gbs2048-fp16": +0.319,
    "bloom-pre-l617-h14336-l72-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.190,
    "bloom-pre-l632-h13824-l84-a64-dp4tp8pp12-mbs2-gbs2048-fp16": +0.250,
    "bloom-pre-l633-h13824-l84-a64-dp4tp8pp12-mbs4-gbs2048-fp16": +0.122,
    "bloom-pre-l634-h13824-l84-a64-dp8tp8pp6-mbs2-gbs2048-fp16": +0.318,
    "bloom-pre-l635-h13824-l84-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.181,
    "bloom-pre-l686-h12288-l96-a64-dp8tp8pp6-mbs2-gbs2048-fp16": +0.379,
    "bloom-pre-l687-h12288-l96-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.208,
    "bloom-pre-l695-h13312-l84-a64-dp4tp8pp12-mbs4-gbs2048-fp16": +0.125,
    "bloom-pre-l696-h13312-l84-a64-dp8tp8pp6-mbs2-gbs2048-fp16": +0.344,
    "bloom-pre-l697-h13312-l84-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.187,
    "bloom-pre-l704-h13824-l78-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.176,
    "bloom-pre-l711-h14336-l72-a64-dp4tp8pp12-mbs4-gbs2048-fp16": +0.117,
    "bloom-pre-l712-h14336-l72-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.184,
    "bloom-pre-l724-h14336-l72-a16-dp8tp8pp6-mbs4-gbs2048-fp16": +0.206,
    "bloom-pre-l725-h14336-l72-a32-dp8tp8pp6-mbs4-gbs2048-fp16": +0.229,
    "bloom-pre-l726-h14336-l72-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.177,
    "bloom-pre-l727-h14336-l72-a112-dp8tp8pp6-mbs4-gbs2048-fp16": +0.337,
    "bloom-pre-l728-h14336-l72-a128-dp8tp8pp6-mbs4-gbs2048-fp16": +0.195,
    "bloom-pre-l729-h14336-l72-a256-dp8tp8pp6-mbs4-gbs2048-fp16": +0.200,
    "bloom-pre-l739-h13824-l78-a96-dp8tp8pp6-mbs4-gbs2048-fp16": +0.195,
    "bloom-pre-l740-h13824-l78-a128-dp8tp8pp6-mbs4-gbs2048-fp16": +0.539,
    "bloom-pre-l751-h13312-l84-a128-dp8tp8pp6-mbs4-gbs2048-fp16": +0.214,
    "bloom-pre-l760-h12288-l96-a96-dp8tp8pp6-mbs4-gbs2048-fp16": +0.406,
    "bloom-pre-l761-h12288-l96-a128-dp8tp8pp6-mbs4-gbs2048-fp16": +0.227,
    "bloom-pre-l775-h14336-l72-a64-dp8tp8pp6-mbs4-gbs1568-fp16": +0.405,
    "bloom-pre-l776-h14336-l72-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.117,
    "bloom-pre-l777-h14336-l72-a64-dp8tp8pp6-mbs6-gbs2016-fp16": +0.189,
    "bloom-pre-l778-h14336-l72-a64-dp4tp8pp12-mbs4-gbs1568-fp16": +0.065,
    "bloom-pre-l779-h14336-l72-a64-dp4tp8pp12-mbs4-gbs2048-fp16": +0.056,
    "bloom-pre-l780-h14336-l72-a64-dp4tp8pp12-mbs2-gbs1568-fp16": +0.196,
    "bloom-pre-l781-h14336-l72-a64-dp4tp8pp12-mbs2-gbs2048-fp16": +0.199,
    "bloom-pre-l788-h14336-l72-a64-dp6tp8pp8-mbs4-gbs2016-fp16": +0.094,
    "bloom-pre-l789-h14336-l72-a64-dp12tp8pp4-mbs2-gbs2016-fp16": +0.310,
    "bloom-pre-l790-h14336-l72-a64-dp12tp8pp4-mbs4-gbs2016-fp16": +0.168,
    "bloom-pre-l791-h14336-l72-a64-dp24tp8pp2-mbs1-gbs2016-fp16": +0.510,
    "bloom-pre-l792-h14336-l72-a64-dp24tp8pp2-mbs2-gbs2016-fp16": +0.420,
    "bloom-pre-l800-h14336-l72-a64-dp8tp4pp12-mbs4-gbs2048-fp16": -0.002,
    "bloom-pre-l801-h14336-l72-a64-dp8tp4pp12-mbs2-gbs2048-fp16": +0.049,
    "bloom-pre-l802-h14336-l72-a64-dp8tp4pp12-mbs2-gbs2048-fp16": +0.078,
    "bloom-pre-l803-h14336-l72-a64-dp16tp4pp6-mbs4-gbs2048-fp16": +0.138,
    "bloom-pre-l804-h14336-l72-a64-dp16tp4pp6-mbs2-gbs2048-fp16": +0.153,
    "bloom-pre-l805-h14336-l72-a64-dp16tp2pp12-mbs2-gbs2048-fp16": +0.030,
    "bloom-pre-l808-h14336-l72-a64-dp8tp2pp24-mbs1-gbs2048-fp16": -0.011,
    "bloom-pre-l809-h14336-l72-a64-dp8tp2pp24-mbs2-gbs2048-fp16": -0.036,
    "bloom-pre-l810-h14336-l72-a64-dp4tp4pp24-mbs1-gbs2048-fp16": +0.087,
    "bloom-pre-l818-h12288-l96-a64-dp8tp1pp48-mbs1-gbs2048-fp16": -0.060,
    "bloom-pre-l830-h13824-l78-a64-dp8tp4pp12-mbs1-gbs2048-fp16": +0.542,
    "bloom-pre-l831-h13824-l78-a64-dp8tp4pp12-mbs2-gbs2048-fp16": +0.046,
    "bloom-pre-l832-h13824-l78-a96-dp8tp4pp12-mbs2-gbs2048-fp16": +0.067,
    "bloom-pre-l833-h13824-l78-a128-dp8tp4pp12-mbs2-gbs2048-fp16": +0.448,
    "bloom-pre-l834-h13824-l78-a64-dp8tp4pp12-mbs4-gbs2048-fp16": +0.010,
    "bloom-pre-l835-h13824-l78-a96-dp8tp4pp12-mbs4-gbs2048-fp16": +0.030,
    "bloom-pre-l836-h13824-l78-a128-dp8tp4pp12-mbs4-gbs2048-fp16": +0.416,
    "bloom-pre-l837-h13824-l78-a96-dp8tp8pp6-mbs4-gbs2048-fp16": +0.131,
    "bloom-pre-l838-h13824-l78-a128-dp8tp8pp6-mbs4-gbs2048-fp16": +0.483,
    "bloom-pre-l845-h14336-l72-a64-dp8tp4pp12-mbs2-gbs2048-fp16": +0.049,
    "bloom-pre-l846-h14336-l72-a128-dp8tp4pp12-mbs2-gbs2048-fp16": +0.058,
    "bloom-pre-l847-h14336-l72-a128-dp8tp4pp12-mbs4-gbs2048-fp16": +0.199,
    "bloom-pre-l848-h14336-l72-a64-dp8tp8pp6-mbs4-gbs2048-fp16": +0.116,
    "bloom-pre-l849-h14336-l72-a128-dp8tp8pp6-mbs4-gbs2048-fp16": +0.110,
    "bloom-pre-l856-h13312-l84-a64-dp8tp4pp12-mbs2-gbs2048-fp16": -0.019,
    "bloom-pre-l857-h13312-l84-a64-dp8tp4pp12-mbs4-gbs2048-fp16": +0.006,
    "bloom-pre-l858-h13312-l84-a64-dp8tp8pp6-mbs2-gbs2048-fp16": +0.285,
    "bloom-pre-l867-h13824-l78-a96-dp8tp4pp12-mbs2-gbs512-fp16": +0.121,
    "bloom-pre-l868-h13824-l78-a96-dp8tp4pp12-mbs2-gbs1024-fp16": +0.090,
    "bloom-pre-l869-h13824-l78-a96-dp8tp4pp12-mbs2-gbs1536-fp16": +0.072,
    "bloom-pre-l881-h13824-l78-a96-dp8tp8pp6-mbs2-gbs2048-fp16": +0.315,
    "bloom-pre-l882-h13824-l78-a96-dp8tp8pp6-mbs4-gbs2048-fp16": +0.132,
    "bloom-pre-l884-h13824-l78-a96-dp16tp4pp6-mbs4-gbs2048-fp16": +0.099,
    "bloom-pre-l891-h12288-l106-a96-dp8tp4pp12-mbs2-gbs2048-fp16": +0.069,
    "bloom-pre-l892-h12288-l106-a64-dp8tp4pp12-mbs2-gbs2048-fp16": +0.070,
    "bloom-pre-l906-h12288-l106-a64-dp8tp4pp12-mbs2-gbs2048-bf16": +0.113,
    "bloom-pre-l907-h12288-l106-a96-dp8tp4pp12-mbs2-gbs2048-bf16": +0.116,
    "bloom-pre-l908-h12288-l106-a128-dp8tp4pp12-mbs2-gbs2048-bf16": +0.119,
    "bloom-pre-l909-h12288-l106-a96-dp8tp4pp12-mbs4-gbs2048-bf16": +0.056,
    "bloom-pre-l919-h12288-l100-a64-dp8tp8pp6-mbs2-gbs2048-bf16": +0.369,
    "bloom-pre-l920-h12288-l100-a64-dp8tp8pp6-mbs4-gbs2048-bf16": +0.154,
    "bloom-pre-l928-h13312-l82-a64-dp4tp8pp12-mbs4-gbs2048-bf16": +0.077,
    "bloom-pre-l929-h13312-l82-a64-dp8tp4pp12-mbs2-gbs2048-bf16": +0.099,
    "bloom-pre-l930-h13312-l82-a104-dp8tp4pp12-mbs2-gbs2048-bf16": +0.284,
    "bloom-pre-l931-h13312-l82-a128-dp8tp4pp12-mbs2-gbs2048-bf16": +0.115,
    "bloom-pre-l932-h13312-l82-a64-dp8tp4pp12-mbs4-gbs2048-bf16": +0.030,
    "bloom-pre-l939-h13312-l94-a128-dp8tp4pp12-mbs2-gbs2048-bf16": +0.122,
    "bloom-pre-l946-h14336-l70-a64-dp4tp8pp12-mbs2-gbs2048-bf16": +0.228,
    "bloom-pre-l947-h14336-l70-a64-dp8tp4pp12-mbs2-gbs2048-bf16": +0.098,
    "bloom-pre-l948-h14336-l70-a112-dp8tp4pp12-mbs2-gbs2048-bf16": +0.105,
    "bloom-pre-l949-h14336-l70-a128-dp8tp4pp12-mbs2-gbs2048-bf16": +0.111,
    "bloom-pre-l950-h14336-l70-a64-dp8tp4pp12-mbs4-gbs2048-bf16": +0.026,
}


XTUNER_DSV2 = "results/published/xtuner_dsv2_zero3_figures.yaml"
# InternLM XTuner's MoE acceleration page (train_moe.rst at 29bb5b2eb, PR #765): DeepSeek-V2 236B under
# DeepSpeed ZeRO-3 on 128 A100, drawn 2026-12-05 (fifty-sixth sitting) by a helper who priced nothing, first
# priced the same sitting once parsim built DeepSeek-V2 (tests/test_moe.py), with the model file it reads.
XTUNER_DSV2_ROWS_SHA256 = "8c97da2d309492e81506e3871943d9858bfb28caac285786e22b63b61840996f"
XTUNER_DSV2_MODELS_SHA256 = {
    "examples/deepseek_v2/config.json": "4cb37d1e07da958c0367cc9697cec37ae0a80ee9a7c922c37232d798fb311e3e",
}


def test_xtuners_deepseek_v2_rows_are_the_set_drawn_held_out_as_first_priced():
    """Seven rows of DeepSeek-V2 fine-tuning under ZeRO-3 over 128 A100 (two scored: XTuner's own MoE path at
    8K and 16K tokens of packed data; the Hugging Face baseline and the variable-length rows excluded), held
    out of every fit, each scored row at its error when first priced
    (results/2026-12-05c-intel-xeon/xtuner-dsv2-heldout.txt): 2.8x and 4.0x the measured throughput."""
    drawn = load_figures(XTUNER_DSV2)
    assert_drawn_as_hashed(XTUNER_DSV2, XTUNER_DSV2_ROWS_SHA256, XTUNER_DSV2_MODELS_SHA256, drawn)
    assert len(drawn.figures) == 7
    assert_held_out_as_pinned(drawn.figures, "xtuner-train-moe-pr765", {
        "xtdsv2-a100-128gpu-shard10-8k-fixed": +3.038,
        "xtdsv2-a100-128gpu-shard10-16k-fixed": +1.815})


BLOOM_MAIN = "results/published/bloom_tr11_main_figures.yaml"
# BLOOM-176B's main run and its July 2022 reshaping runs (bigscience train/tr11-176B-ml at 9e64edec2), drawn
# 2026-12-05 (fifty-seventh sitting) by a helper who priced nothing; hashed as reviewed before any pricing (the
# one-micro-batch row as gpipe, the timeline DeepSpeed's TrainSchedule runs with one micro-batch).
BLOOM_MAIN_ROWS_SHA256 = "be3c508d4f238ae81fd83e09cbf750c420c2b002d27c5aed38742b8c7d07e710"
# each scored row's throughput error when first priced (results/2026-12-05d-intel-xeon/bloom-main-heldout.txt)
BLOOM_MAIN_FIRST_PRICED = {
    "bloom-main-readme245-48n-dp8tp4pp12-mbs2-gbs16": +0.460,
    "bloom-main-readme272-48n-dp8tp4pp12-mbs1-gbs192": +0.415,
    "bloom-main-chron45-48n-dp8tp4pp12-mbs2-gbs2048": +0.112,
    "bloom-main-reshape32-24n-dp2tp4pp24-mbs1-gbs2048": +0.188,
    "bloom-main-reshape39-24n-dp4tp2pp24-mbs1-gbs2048": +0.086,
    "bloom-main-reshape50-36n-dp2tp4pp36-mbs1-gbs2048": +0.180,
    "bloom-main-reshape59-36n-dp4tp2pp36-mbs1-gbs2048": +0.067,
    "bloom-main-reshape67-36n-dp4tp1pp72-mbs1-gbs2048": -0.112,
}


def test_blooms_main_run_rows_are_the_set_drawn_held_out_as_first_priced():
    """11 rows of BLOOM-176B's main and reshaping runs on 24-48 Jean Zay nodes (8 scored; 3 excluded: a figure
    with no run named, start-up iterations only), held out of every fit, each scored row at its error when
    first priced: 7 of 8 priced fast, median +14.6%, as the expectation committed before pricing said a
    DeepSpeed harness would run (results/2026-12-05d-intel-xeon/preregistered.md, H1)."""
    drawn = load_figures(BLOOM_MAIN)
    assert_drawn_as_hashed(BLOOM_MAIN, BLOOM_MAIN_ROWS_SHA256, None, drawn)
    assert len(drawn.figures) == 11
    assert {f.profile for f in drawn.figures} == {"jean-zay-a100"}
    assert_held_out_as_pinned(drawn.figures, "bloom-tr11-main", BLOOM_MAIN_FIRST_PRICED)


ULTRASCALE = "results/published/ultrascale_playbook_figures.yaml"
# Hugging Face's Ultra-Scale Playbook runs (nanotron on 1-64 nodes of 8 H100), a seeded sample of 40 of its
# 1,746 configurations drawn 2026-12-05 (fifty-seventh sitting) by a helper who priced nothing; hashed as
# reviewed before any pricing (four rows restored that a rounding check had excluded; placeholders that let
# two excluded kinds of row price).
ULTRASCALE_ROWS_SHA256 = "a22a79941e6e7fcafab6855284f88384da2954d216b639d213f27eabd7879a05"
# each scored row's throughput error when first priced (results/2026-12-05d-intel-xeon/ultrascale-heldout.txt)
ULTRASCALE_FIRST_PRICED = {
    "ultrascale-1b-n16-dp64-tp2-pp1-mbs2-ga2-z1": +0.558, "ultrascale-1b-n4-dp1-tp16-pp2-mbs64-ga4-z0": +1.450,
    "ultrascale-1b-n2-dp2-tp2-pp4-mbs8-ga16-z1": +0.038, "ultrascale-1b-n8-dp1-tp16-pp4-mbs32-ga8-z0": +0.888,
    "ultrascale-1b-n4-dp2-tp4-pp4-mbs4-ga32-z1": +1.107, "ultrascale-1b-n16-dp32-tp2-pp2-mbs1-ga8-z1": +1.962,
    "ultrascale-3b-n1-dp4-tp2-pp1-mbs1-ga64-z0": +0.224, "ultrascale-3b-n8-dp2-tp4-pp8-mbs1-ga128-z0": +109.865,
    "ultrascale-3b-n16-dp2-tp16-pp4-mbs16-ga8-z1": +1.687, "ultrascale-3b-n64-dp64-tp4-pp2-mbs1-ga4-z1": +14.616,
    "ultrascale-3b-n64-dp64-tp2-pp4-mbs1-ga4-z1": +21.649, "ultrascale-3b-n4-dp4-tp4-pp2-mbs8-ga8-z1": +0.210,
    "ultrascale-3b-n4-dp2-tp4-pp4-mbs1-ga128-z1": +4.275, "ultrascale-3b-n8-dp16-tp2-pp2-mbs2-ga8-z1": +0.345,
    "ultrascale-8b-n8-dp2-tp4-pp8-mbs4-ga32-z1": +0.214, "ultrascale-8b-n1-dp1-tp8-pp1-mbs8-ga32-z0": +0.172,
    "ultrascale-8b-n64-dp16-tp32-pp1-mbs2-ga8-z1": +24.200, "ultrascale-8b-n16-dp8-tp8-pp2-mbs2-ga16-z1": +3.304,
    "ultrascale-8b-n8-dp4-tp8-pp2-mbs1-ga64-z1": +6.834, "ultrascale-8b-n2-dp1-tp8-pp2-mbs8-ga32-z0": +0.183,
    "ultrascale-8b-n16-dp8-tp16-pp1-mbs2-ga16-z1": +1.670, "ultrascale-8b-n64-dp4-tp16-pp8-mbs8-ga8-z1": +17.336,
    "ultrascale-8b-n32-dp32-tp8-pp1-mbs1-ga8-z0": +0.763, "ultrascale-80b-n8-dp2-tp8-pp4-mbs2-ga64-z1": +4.104,
    "ultrascale-80b-n16-dp4-tp16-pp2-mbs1-ga64-z1": +8.767, "ultrascale-80b-n64-dp2-tp32-pp8-mbs8-ga16-z1": +6.527,
    "ultrascale-80b-n16-dp4-tp32-pp1-mbs1-ga64-z0": +2.631, "ultrascale-80b-n64-dp2-tp8-pp32-mbs2-ga64-z1": +25.549,
    "ultrascale-80b-n32-dp4-tp32-pp2-mbs2-ga32-z1": +13.862, "ultrascale-80b-n64-dp32-tp8-pp2-mbs1-ga8-z1": +3.763,
    "ultrascale-80b-n64-dp16-tp32-pp1-mbs4-ga4-z0": +9.072, "ultrascale-80b-n16-dp4-tp32-pp1-mbs1-ga64-z1": +2.678,
}


def test_the_ultrascale_playbooks_rows_are_the_set_drawn_held_out_as_first_priced():
    """40 rows drawn by seed from the Ultra-Scale Playbook's nanotron runs on H100 (32 scored; 8 excluded: a
    pipeline split parsim cannot express, cells that contradict each other, another model's MFU), held out of
    every fit, each scored row at its error when first priced: 26 of 32 beyond 25%, every one priced fast,
    median +265% (results/2026-12-05d-intel-xeon/ultrascale-groups.txt takes them apart)."""
    drawn = load_figures(ULTRASCALE)
    assert_drawn_as_hashed(ULTRASCALE, ULTRASCALE_ROWS_SHA256, None, drawn)
    assert len(drawn.figures) == 40
    assert {f.profile for f in drawn.figures} == {"dgx-h100"}
    assert_held_out_as_pinned(drawn.figures, "ultrascale-playbook", ULTRASCALE_FIRST_PRICED)


MDS_LONGSEQ = "results/published/megatron_ds_longseq_figures.yaml"
# The DeepSpeed team's long-sequence table for Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed at cc3a94c6),
# drawn 2026-12-05 (fifty-seventh sitting) by a helper who priced nothing; its model is an inline GPT config.
MDS_LONGSEQ_ROWS_SHA256 = "52926f0197aaf40e940f7879650f70f9beddfc54a4bd2b812180c16daef90a43"
# each scored row's throughput error when first priced (results/2026-12-05d-intel-xeon/megatron-ds-longseq-heldout.txt)
MDS_LONGSEQ_FIRST_PRICED = {
    "mds-longseq-new-gpt30b-s2k-tp32-dgxa100-40g": -0.393, "mds-longseq-new-gpt30b-s4k-tp32-dgxa100-40g": -0.275,
    "mds-longseq-new-gpt30b-s8k-tp32-dgxa100-40g": -0.136, "mds-longseq-new-gpt30b-s16k-tp32-dgxa100-40g": -0.021,
    "mds-longseq-new-gpt30b-s32k-tp32-dgxa100-40g": +0.067, "mds-longseq-new-gpt30b-s64k-tp32-dgxa100-40g": +0.175,
    "mds-longseq-new-gpt30b-s128k-tp32-dgxa100-40g": +0.192, "mds-longseq-new-gpt30b-s256k-tp32-dgxa100-40g": +0.658,
}


def test_the_deepspeed_long_sequence_rows_are_the_set_drawn_held_out_as_first_priced():
    """10 rows of a GPT-3 30B at 2K-256K tokens, tp 32 over 4 DGX A100-40GB nodes (8 scored; 2 excluded: the code
    before Megatron-DeepSpeed's rebase, its settings unknown), held out of every fit, each scored row at its
    error when first priced: from -39% at 2K to +66% at 256K, median measured / predicted step 1.02."""
    drawn = load_figures(MDS_LONGSEQ)
    assert_drawn_as_hashed(MDS_LONGSEQ, MDS_LONGSEQ_ROWS_SHA256, None, drawn)
    assert len(drawn.figures) == 10
    assert {f.profile for f in drawn.figures} == {"dgx-a100"}
    assert_held_out_as_pinned(drawn.figures, "megatron-ds-longseq", MDS_LONGSEQ_FIRST_PRICED)


NEMOTRON4 = "results/published/nemotron4_figures.yaml"
# NVIDIA's Nemotron-4 340B and 15B reports' batch-ramp tables (iteration times of the production runs), drawn
# 2026-12-05 (fifty-eighth sitting) by a helper who priced nothing; the 340B rows read examples/nemotron_340b,
# the 15B rows an inline config.
NEMOTRON4_ROWS_SHA256 = "44cb13ace032229721eeb7e71cc4266a2465133354623ea62c66b1175beb9b96"
NEMOTRON4_MODELS_SHA256 = {"examples/nemotron_340b/config.json":
                           "c5c10e80250940fd85f142f93804b2577cd5e1e592670d593cc108a4a2e71f57"}
# each scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/nemotron4-heldout.txt)
NEMOTRON4_340B_FIRST_PRICED = {
    "nemotron4-340b-t2-dp16-1536gpu-gbs768": +0.023, "nemotron4-340b-t2-dp32-3072gpu-gbs1536": +0.022,
    "nemotron4-340b-t2-dp64-6144gpu-gbs2304": +0.038,
}
NEMOTRON4_15B_FIRST_PRICED = {
    "nemotron4-15b-t2-dp96-768gpu-gbs384": -0.263, "nemotron4-15b-t2-dp192-1536gpu-gbs768": -0.330,
    "nemotron4-15b-t2-dp288-2304gpu-gbs1152": -0.331,
}


def test_nemotron4s_rows_are_the_sets_drawn_held_out_as_first_priced():
    """Six rows of two held-out families: Nemotron-4 340B on 1,536-6,144 H100 (tp 8, pp 12 interleaved), its
    steps 2-4% longer than priced, and Nemotron-4 15B on 768-2,304 (tp 8, no pipeline), its steps 26-33%
    shorter than priced (micro-batch and recompute assumed: results/drawn/nemotron4_report.md)."""
    drawn = load_figures(NEMOTRON4)
    assert_drawn_as_hashed(NEMOTRON4, NEMOTRON4_ROWS_SHA256, NEMOTRON4_MODELS_SHA256, drawn)
    assert len(drawn.figures) == 6 and {f.profile for f in drawn.figures} == {"dgx-h100-superpod"}
    for source, errors in (("nemotron4-340b-report", NEMOTRON4_340B_FIRST_PRICED),
                           ("nemotron4-15b-report", NEMOTRON4_15B_FIRST_PRICED)):
        assert_held_out_as_pinned([f for f in drawn.figures if f.source == source], source, errors)


MEGASCALE_DENSE = "results/published/megascale_dense_baseline_figures.yaml"
# MegaScale's (NSDI '24) Megatron-LM baseline of a 175B GPT on 256-12,288 Ampere GPUs, drawn 2026-12-05
# (fifty-eighth sitting) by a helper who priced nothing; its model is an inline GPT config.
MEGASCALE_DENSE_ROWS_SHA256 = "50780751f7333defefd35775a70fbc080361ae7121e0a34aa996be81f46d7997"
# each scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/megascale-dense-heldout.txt)
MEGASCALE_DENSE_FIRST_PRICED = {
    "msd-t2-megatron-175b-256gpu": -0.016, "msd-t2-megatron-175b-512gpu": +0.024,
    "msd-t2-megatron-175b-768gpu": +0.076, "msd-t2-megatron-175b-1024gpu": +0.101,
    "msd-t2-megatron-175b-3072gpu": +0.057, "msd-t2-megatron-175b-6144gpu": +0.046,
    "msd-t2-megatron-175b-8192gpu": +0.134, "msd-t2-megatron-175b-12288gpu": +0.150,
}


def test_megascales_megatron_baseline_rows_are_the_set_drawn_held_out_as_first_priced():
    """20 rows, 8 scored (MegaScale's own 8, three chart labels and the MFU-derived Table 3 row excluded): the
    Megatron-LM baseline's 175B from 256 to 12,288 GPUs, its steps -2% to +15% against their prices, the
    miss growing with the GPU count."""
    assert_held_out_set(MEGASCALE_DENSE, MEGASCALE_DENSE_ROWS_SHA256, None, 20, ("dgx-a100",),
                        "megascale-dense-baseline", MEGASCALE_DENSE_FIRST_PRICED)


LAMBDA_DS_PP = "results/published/lambda_deepspeed_pp_figures.yaml"
# Lambda's GPT-NeoX example on DeepSpeed's pipeline engine, drawn 2026-12-05 (fifty-eighth sitting) by a
# helper who priced nothing; its model is an inline GPT config.
LAMBDA_DS_PP_ROWS_SHA256 = "7ff9bd38ea1eeab53f2492281ff98b35dd0548b9361f28c131d580e934f7e856"
# the scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/lambda-deepspeed-pp-heldout.txt)
LAMBDA_DS_PP_FIRST_PRICED = {"lambda-neox-l267-h4096-l44-a64-dp1tp2pp4-mbs4-gbs128-fp16": +0.105}


def test_lambdas_deepspeed_pipeline_rows_are_the_set_drawn_held_out_as_first_priced():
    """4 rows, 1 scored (the three crossing nodes over TCP sockets of unstated speed excluded on review, before
    pricing): one node of 8 A100 under DeepSpeed's pipeline engine, its step 10.5% longer than priced."""
    assert_held_out_set(LAMBDA_DS_PP, LAMBDA_DS_PP_ROWS_SHA256, None, 4, ("ibm-a100-400g",),
                        "lambda-deepspeed-pp", LAMBDA_DS_PP_FIRST_PRICED)


DISTFLASHATTN = "results/published/distflashattn_baselines_figures.yaml"
# DistFlashAttn's (COLM 2024) Megatron-LM baseline at 64K-512K tokens on one and two DGX A100 boxes, drawn
# 2026-12-05 (fifty-eighth sitting, second draw) by a helper who priced nothing; its models are inline configs.
DISTFLASHATTN_ROWS_SHA256 = "219e3615b1adf6dcda4a2bfd03192f7c33264b3f7aabc202cd2d7957d0d1ba58"
# each scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/distflashattn-heldout.txt)
DISTFLASHATTN_FIRST_PRICED = {
    "dfa-megatron-7b-1x8-64k": +0.035, "dfa-megatron-gqa-1x8-64k": +0.046, "dfa-megatron-7b-1x8-128k": +0.057,
    "dfa-megatron-gqa-1x8-128k": +0.066, "dfa-megatron-7b-1x8-256k": +0.097, "dfa-megatron-gqa-1x8-256k": +0.102,
    "dfa-megatron-7b-2x8-128k": -0.681, "dfa-megatron-gqa-2x8-128k": -0.724, "dfa-megatron-7b-2x8-256k": -0.577,
    "dfa-megatron-gqa-2x8-256k": -0.628, "dfa-megatron-7b-2x8-512k": -0.432, "dfa-megatron-gqa-2x8-512k": -0.488,
}


def test_distflashattns_megatron_rows_are_the_set_drawn_held_out_as_first_priced():
    """22 rows, 12 scored: one box's tp 8 rows 3.5-10.2% slower than priced, growing with the sequence; the two
    boxes' tp 16 rows 43-72% faster than priced on the one 100 Gb/s link the paper was read to give them
    (hardware_profiles/dgx-a100-ib100.yaml, written on review before pricing)."""
    assert_held_out_set(DISTFLASHATTN, DISTFLASHATTN_ROWS_SHA256, None, 22, ("dgx-a100", "dgx-a100-ib100"),
                        "distflashattn-baselines", DISTFLASHATTN_FIRST_PRICED)


INTERNLM = "results/published/internlm_train_perf_figures.yaml"
# InternLM's training-performance page (InternLM-7B on 8-1,024 A100 under its own trainer), drawn 2026-12-05
# (fifty-eighth sitting, second draw) by a helper who priced nothing; its rows read examples/internlm_7b.
INTERNLM_ROWS_SHA256 = "f6e66d8a69d375e281ee4749a488d536472b260cd67ca149c3884b9bd9adfacb"
INTERNLM_MODELS_SHA256 = {"examples/internlm_7b/config.json":
                          "c859ffff6b79e48eb77971e2e10202f1e1c71791a229edf9808a4a8e669631ed"}
# each scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/internlm-heldout.txt)
INTERNLM_FIRST_PRICED = {
    "internlm-tput-tp1-zall-8gpu": +0.118, "internlm-tput-tp1-zall-16gpu": +0.028,
    "internlm-tput-tp1-zall-32gpu": +0.048, "internlm-tput-tp1-zall-64gpu": +0.061,
    "internlm-tput-tp1-zall-128gpu": +0.091, "internlm-tput-tp1-zall-256gpu": +0.204,
    "internlm-tput-tp1-zall-512gpu": +0.313, "internlm-tput-tp1-zall-1024gpu": +0.567,
    "internlm-tput-tp1-z8-8gpu": +0.114, "internlm-tput-tp1-z8-512gpu": +0.003,
    "internlm-tput-tp2-zall-8gpu": +0.150, "internlm-tput-tp2-zall-16gpu": +0.069,
    "internlm-tput-tp2-zall-32gpu": +0.096, "internlm-tput-tp2-zall-64gpu": +0.102,
    "internlm-tput-tp2-zall-128gpu": +0.140, "internlm-tput-tp2-zall-256gpu": +0.212,
    "internlm-tput-tp2-zall-512gpu": +0.242, "internlm-tput-tp2-zall-1024gpu": +0.298,
    "internlm-tput-tp2-z4-8gpu": +0.169, "internlm-tput-tp2-z4-16gpu": +0.177,
    "internlm-tput-tp2-z4-32gpu": +0.109, "internlm-tput-tp2-z4-64gpu": +0.072,
    "internlm-tput-tp2-z4-128gpu": +0.052, "internlm-tput-tp2-z4-256gpu": +0.039,
    "internlm-tput-tp2-z4-512gpu": +0.054, "internlm-tput-tp2-z4-1024gpu": +0.085,
    "internlm-flops-ckpt-tp1-z8-mb8x1-8gpu": +0.049, "internlm-flops-ckpt-tp1-z8-mb8x1-16gpu": +0.047,
    "internlm-flops-ckpt-tp1-z8-mb8x1-32gpu": +0.021, "internlm-flops-ckpt-tp1-z8-mb8x1-64gpu": +0.051,
    "internlm-flops-ckpt-tp1-z8-mb8x1-128gpu": +0.034, "internlm-flops-ckpt-tp1-z8-mb8x1-256gpu": +0.047,
    "internlm-flops-ckpt-tp1-z8-mb8x1-512gpu": +0.052, "internlm-flops-ckpt-tp1-z8-mb8x1-1024gpu": +0.064,
    "internlm-flops-ckpt-tp1-z8-mb4x1-512gpu": +0.080, "internlm-flops-ckpt-tp1-z8-mb2x1-1024gpu": +0.073,
    "internlm-flops-ckpt-tp1-z8-mb4x1-1024gpu": +0.144, "internlm-flops-nockpt-tp1-z8-mb2x4-8gpu": +0.107,
    "internlm-flops-nockpt-tp1-z8-mb2x4-512gpu": -0.013, "internlm-flops-nockpt-tp1-z8-mb2x2-512gpu": +0.065,
    "internlm-flops-nockpt-tp1-z8-mb2x1-1024gpu": +0.081, "internlm-flops-nockpt-tp1-z8-mb2x2-1024gpu": +0.165,
}


def test_internlms_rows_are_the_set_drawn_held_out_as_first_priced():
    """54 rows, 42 scored (six cells printed twice with contradictory packing, both copies excluded): InternLM-7B
    on 8-1,024 A100 under InternLM's own trainer, -1% to +57% against their prices; ZeRO-1 over every rank runs
    slower than priced as the ranks grow (+3% at 16 GPUs, +57% at 1,024), over groups of 8 or 4 within 0-18%."""
    assert_held_out_set(INTERNLM, INTERNLM_ROWS_SHA256, INTERNLM_MODELS_SHA256, 54, ("ibm-a100-400g",),
                        "internlm-train-perf", INTERNLM_FIRST_PRICED)


ZERO_BUBBLE = "results/published/zero_bubble_paper_figures.yaml"
# Sea AI Lab's Zero Bubble Pipeline Parallelism (ICLR 2024): Megatron-LM's 1F1B and interleaved baselines in pure
# pipelines of 8-32 A100, drawn 2026-12-05 (fifty-eighth sitting, second draw) by a helper who priced nothing;
# its models are the zoo's GPT.
ZERO_BUBBLE_ROWS_SHA256 = "52458b3170a33a8f0e07f5e301765784ee20af3345214c636b24a098023f7015"
# each scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/zero-bubble-heldout.txt)
ZERO_BUBBLE_FIRST_PRICED = {
    "zb-t4-1.5b-1f1b-p8-m24-b6": +0.032, "zb-t4-1.5b-1f1b-p8-m32-b6": +0.029, "zb-t4-1.5b-1f1b-p8-m64-b6": +0.032,
    "zb-t4-6.2b-1f1b-p8-m24-b3": +0.019, "zb-t4-6.2b-1f1b-p8-m32-b3": +0.020, "zb-t4-6.2b-1f1b-p8-m64-b3": +0.026,
    "zb-t4-14.6b-1f1b-p16-m48-b1": -0.025, "zb-t4-14.6b-1f1b-p16-m64-b1": -0.023,
    "zb-t4-14.6b-1f1b-p16-m128-b1": -0.013, "zb-t4-28.3b-1f1b-p32-m96-b1": -0.056,
    "zb-t4-28.3b-1f1b-p32-m128-b1": -0.046, "zb-t4-28.3b-1f1b-p32-m256-b1": -0.039,
    "zb-t4-1.5b-1f1b-i-p8-m24-b6": +0.085, "zb-t4-1.5b-1f1b-i-p8-m32-b6": +0.083,
    "zb-t4-1.5b-1f1b-i-p8-m64-b6": +0.077, "zb-t4-6.2b-1f1b-i-p8-m24-b3": +0.076,
    "zb-t4-6.2b-1f1b-i-p8-m32-b3": +0.073, "zb-t4-6.2b-1f1b-i-p8-m64-b3": +0.069,
    "zb-t4-14.6b-1f1b-i-p16-m48-b1": +0.086, "zb-t4-14.6b-1f1b-i-p16-m64-b1": +0.096,
    "zb-t4-14.6b-1f1b-i-p16-m128-b1": +0.119, "zb-t4-28.3b-1f1b-i-p32-m96-b1": +0.060,
    "zb-t4-28.3b-1f1b-i-p32-m128-b1": +0.071, "zb-t4-28.3b-1f1b-i-p32-m256-b1": +0.088,
    "zb-t6-6.2b-1f1b-p16-m48-b6": -0.066, "zb-t6-6.2b-1f1b-p16-m64-b6": -0.069,
    "zb-t6-6.2b-1f1b-p16-m128-b6": -0.075, "zb-t6-14.6b-1f1b-p24-m72-b2": -0.098,
    "zb-t6-14.6b-1f1b-p24-m96-b2": -0.097, "zb-t6-14.6b-1f1b-p24-m192-b2": -0.092,
    "zb-t6-28.3b-1f1b-p32-m96-b2": -0.092, "zb-t6-28.3b-1f1b-p32-m128-b2": -0.092,
    "zb-t6-28.3b-1f1b-p32-m256-b2": -0.085, "zb-t7-6.2b-1f1b-p16-m64-b3": -0.067,
    "zb-t7-14.6b-1f1b-p24-m96-b1": -0.046, "zb-t7-28.3b-1f1b-p32-m128-b1": -0.046,
    "zb-t11-1.5b-1f1b-p8-m24-b12": +0.023, "zb-t11-1.5b-1f1b-p8-m32-b12": +0.029,
    "zb-t11-1.5b-1f1b-p8-m64-b12": +0.025, "zb-t11-6.2b-1f1b-p8-m24-b6": +0.018,
    "zb-t11-6.2b-1f1b-p8-m32-b6": +0.019, "zb-t11-6.2b-1f1b-p8-m64-b6": +0.026,
    "zb-t11-14.6b-1f1b-p16-m48-b2": -0.069, "zb-t11-14.6b-1f1b-p16-m128-b2": -0.065,
    "zb-t11-28.3b-1f1b-p32-m96-b2": -0.081, "zb-t11-28.3b-1f1b-p32-m256-b2": -0.075,
    "zb-t12-1.5b-1f1b-p8-m8-b6": +0.034, "zb-t12-6.2b-1f1b-p8-m8-b3": +0.011, "zb-t12-14.6b-1f1b-p16-m16-b1": -0.044,
}


def test_zero_bubbles_baseline_rows_are_the_set_drawn_held_out_as_first_priced():
    """140 rows, 49 scored (the zero-bubble schedules parsim does not name, and eight cells the paper's tables
    contradict or 1F1B cannot run, excluded): 1F1B within -10% to +3% of its price, interleaved 1F1B 6-12%
    slower than priced."""
    assert_held_out_set(ZERO_BUBBLE, ZERO_BUBBLE_ROWS_SHA256, None, 140, ("ibm-a100-400g",),
                        "zero-bubble-paper", ZERO_BUBBLE_FIRST_PRICED)


KWAI_ATC24 = "results/published/kwai_atc24_figures.yaml"
# Kuaishou's USENIX ATC '24 artifact (kwai/Megatron-Kwai at b2646e4d): stock Megatron-LM and Kuaishou's fork on
# 4-256 H800, drawn 2026-12-05 (fifty-eighth sitting, third draw) by a helper who priced nothing; its models are
# inline configs.
KWAI_ATC24_ROWS_SHA256 = "61b1776a6dc59039edc984ba69ff0da9451c9bca7ecec22a2a26b0e794bc0401"
# each scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/kwai-atc24-heldout.txt)
KWAI_ATC24_FIRST_PRICED = {
    "kwai-atc24-demo-l61-llama-7b-s12288-4g-t1c1p4l1-full-kwai-fork-h800": +0.021,
    "kwai-atc24-demo-l63-llama-7b-s12288-4g-t1c1p4l1-full-origin-mlm-h800": +0.062,
    "kwai-atc24-t8-l107-llama-175b-s8192-256g-t2c2p16l1-full-kwai-fork-h800": +0.035,
    "kwai-atc24-t8-l109-llama-175b-s8192-256g-t2c2p16l1-full-origin-mlm-h800": +0.157,
    "kwai-atc24-f9-l165-llama-65b-s4096-200g-t4c1p5l4-no-kwai-fork-h800": +0.110,
    "kwai-atc24-f9-l166-llama-65b-s4096-192g-t4c1p8l2-no-kwai-fork-h800": +0.100,
    "kwai-atc24-f9-l170-llama-65b-s4096-112g-t4c1p4l4-no-kwai-fork-h800": +0.121,
    "kwai-atc24-f9-l178-llama2-70b-s8192-256g-t2c4p8l2-no-kwai-fork-h800": +0.101,
    "kwai-atc24-f9-l179-llama2-70b-s8192-240g-t2c4p10l2-no-kwai-fork-h800": +0.096,
    "kwai-atc24-f9-l182-llama2-70b-s8192-192g-t2c4p8l2-no-kwai-fork-h800": +0.095,
    "kwai-atc24-f9-l183-llama2-70b-s8192-160g-t2c4p10l2-no-kwai-fork-h800": +0.094,
}


def test_kwais_megatron_rows_are_the_set_drawn_held_out_as_first_priced():
    """50 rows, 11 scored (the paper's own checkpointing and offloading, and the A800 cells, excluded): Llama
    7B-175B and Llama 2 70B on 4-256 H800, their steps 2-16% longer than priced; the multi-node rows on
    hardware_profiles/hgx-h800-roce100.yaml, written on review before pricing for the README's 100 Gb/s NICs."""
    drawn = load_figures(KWAI_ATC24)
    assert_drawn_as_hashed(KWAI_ATC24, KWAI_ATC24_ROWS_SHA256, None, drawn)
    assert len(drawn.figures) == 50 and {"hgx-h800", "hgx-h800-roce100"} <= {f.profile for f in drawn.figures}
    assert_held_out_as_pinned(drawn.figures, "kwai-atc24", KWAI_ATC24_FIRST_PRICED)


YANDEX_FSDP = "results/published/yandex_fsdp_figures.yaml"
# Yandex's YaFSDP README benchmark table (yandex/YaFSDP at a61a4a6), its PyTorch FSDP1 column, drawn 2026-12-05
# (fifty-eighth sitting, fourth draw) by a helper who priced nothing; its rows read examples' model files.
YANDEX_FSDP_ROWS_SHA256 = "c584807e960c692abbf34df64a27725b94cdc4de1bff85590cd5fd7536f924a1"
YANDEX_FSDP_MODELS_SHA256 = {
    "examples/codellama_34b/config.json": "a9647babdbaa48b18974360004d21763095cc27e500982969581410098b61ec2",
    "examples/llama2_13b/config.json": "ca133a37bfd7c5c3354037d6f08475db7b5fa48635088ab1d081bccb68f1d035",
    "examples/llama2_70b/config.json": "1b6f50e64839120e53b97aeb219b03cfe6728af6447d68630af35fe17f747cbe",
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
    "examples/llama3_70b/config.json": "75807d84c3a1f0637db824170ffa2dcf9d73aa49d4f53656b6710b7808601fb8",
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
}
# each scored row's throughput error when first priced (results/2026-12-05e-intel-xeon/yandex-fsdp-heldout.txt)
YANDEX_FSDP_FIRST_PRICED = {
    "yandex-fsdp-llama2-7b-64gpu-s2048": +0.511,
    "yandex-fsdp-llama2-7b-64gpu-s4096": +0.098,
    "yandex-fsdp-llama2-7b-64gpu-s8192": +0.023,
    "yandex-fsdp-llama2-7b-128gpu-s2048": +0.610,
    "yandex-fsdp-llama2-7b-128gpu-s4096": +0.100,
    "yandex-fsdp-llama2-7b-128gpu-s8192": +0.029,
    "yandex-fsdp-llama2-13b-128gpu-s2048": +0.587,
    "yandex-fsdp-llama2-13b-128gpu-s4096": +0.048,
    "yandex-fsdp-llama2-34b-128gpu-s2048": +0.591,
    "yandex-fsdp-llama2-34b-256gpu-s2048": +0.664,
    "yandex-fsdp-llama2-34b-256gpu-s4096-ckpt5": +0.141,
    "yandex-fsdp-llama2-70b-256gpu-s2048-ckpt10": +0.587,
    "yandex-fsdp-llama2-70b-256gpu-s4096-ckpt50": +0.023,
    "yandex-fsdp-llama3-8b-64gpu-s2048": +0.611,
    "yandex-fsdp-llama3-8b-64gpu-s4096": +0.198,
    "yandex-fsdp-llama3-70b-256gpu-s2048-ckpt20": +0.667,
}


def test_yandexs_fsdp_rows_are_the_set_drawn_held_out_as_first_priced():
    """16 rows, all scored: Llama 2 and 3 under FSDP1 FULL_SHARD on 64-256 A100, their steps 51-67% longer than
    priced at 2,048 tokens and 2-20% at 4,096-8,192."""
    assert_held_out_set(YANDEX_FSDP, YANDEX_FSDP_ROWS_SHA256, YANDEX_FSDP_MODELS_SHA256, 16, ("dgx-a100",),
                        "yandex-fsdp", YANDEX_FSDP_FIRST_PRICED)


# NVIDIA JAX-Toolbox's Pax rows (the fifty-ninth sitting's draw): drawn by a helper who priced nothing,
# reviewed (the three GPT 126M rows excluded by the source's words: data-loading-bound on a real dataset) and
# committed before the first pricing (results/2026-12-05f-intel-xeon/jax-toolbox-pax-heldout.txt), the
# expectations committed before that (results/2026-12-05f-intel-xeon/preregistered.md)
JAX_PAX = "results/published/jax_toolbox_pax_figures.yaml"
JAX_PAX_ROWS_SHA256 = "66d3e632e619a12538692d1cddefc0fe943e4e117b8bc0d6f8adac9757ccf916"
JAX_PAX_MODELS_SHA256 = {
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
}
# each scored row's throughput error when first priced (jax-toolbox-pax-heldout.txt)
JAX_PAX_FIRST_PRICED = {
    "jaxpax-gpt5b-a100-256gpu-bf16": +0.338,
    "jaxpax-gpt5b-a100-256gpu-tebf16": +0.107,
    "jaxpax-gpt175b-a100-256gpu-tebf16": -0.078,
    "jaxpax-gpt5b-h100-256gpu-tebf16": +0.296,
    "jaxpax-gpt175b-h100-256gpu-tebf16": +0.054,
    "jaxpax-gpt5b-h100-256gpu-tefp8": +0.215,
    "jaxpax-gpt175b-h100-256gpu-tefp8": -0.039,
    "jaxpax-llama2-7b-sft-h100-16gpu-bf16": +0.077,
    "jaxpax-llama2-7b-sft-h100-16gpu-tebf16": -0.133,
}


def test_jax_toolbox_pax_rows_are_the_set_drawn_held_out_as_first_priced():
    """15 rows, 9 scored: GPT 5B and 175B under XLA's FSDP on 256 A100 or H100 and LLaMA-2 7B SFT on 16 H100,
    their steps 0.87-1.34x the predicted; the 126M and LoRA rows excluded."""
    assert_held_out_set(JAX_PAX, JAX_PAX_ROWS_SHA256, JAX_PAX_MODELS_SHA256, 15, ("dgx-a100", "dgx-h100"),
                        "jax-toolbox-pax-2404", JAX_PAX_FIRST_PRICED)


# Google MaxText's Llama-2 7B rows on A3 High (the fifty-ninth sitting's second draw): drawn by a helper who
# priced nothing, reviewed and committed before the first pricing
# (results/2026-12-05f-intel-xeon/maxtext-a3-heldout.txt), the addendum to the expectations committed before that
MAXTEXT_A3 = "results/published/maxtext_a3_figures.yaml"
MAXTEXT_A3_ROWS_SHA256 = "f1b764cb9af7a5e8837ed3530d93c0cf3635c77db2339f5282174d5cc2761d54"
MAXTEXT_A3_MODELS_SHA256 = {
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
}
# each scored row's step-time error when first priced (maxtext-a3-heldout.txt)
MAXTEXT_A3_FIRST_PRICED = {
    "maxtext-a3-llama2-7b-8gpu": +0.112,
    "maxtext-a3-llama2-7b-16gpu": +0.262,
    "maxtext-a3-llama2-7b-32gpu": +0.291,
    "maxtext-a3-llama2-7b-64gpu": +0.276,
    "maxtext-a3-llama2-7b-128gpu": +0.386,
}


def test_maxtexts_a3_rows_are_the_set_drawn_held_out_as_first_priced():
    """5 rows, all scored: Llama-2 7B under MaxText's FSDP on 1-16 A3 High VMs, priced on ibm-h100-800g (TCPX not
    modelled), their steps 1.11x the predicted on one VM and 1.26-1.39x across VMs."""
    assert_held_out_set(MAXTEXT_A3, MAXTEXT_A3_ROWS_SHA256, MAXTEXT_A3_MODELS_SHA256, 5, ("ibm-h100-800g",),
                        "maxtext-a3-llama2-7b", MAXTEXT_A3_FIRST_PRICED)


# AWS's Megatron-Bridge token-dispatcher campaign (the fifty-ninth sitting's third draw): drawn by a helper who
# priced nothing, reviewed and committed before the first pricing
# (results/2026-12-05f-intel-xeon/aws-qwen3-30b-heldout.txt), the second addendum to the expectations before that
AWS_QWEN3 = "results/published/aws_qwen3_30b_p5_figures.yaml"
AWS_QWEN3_ROWS_SHA256 = "23bb091d5303f9efdb04051f3d0ccb0110cf6a92f5b4fcbd646439c4309221c4"
AWS_QWEN3_MODELS_SHA256 = {
    "examples/qwen3_30b_a3b/config.json": "98a4cf452e3d94b7b22d8ddd515a3fe028f76404529460935e26770c4ab2b094",
}
# each scored row's step-time error when first priced (aws-qwen3-30b-heldout.txt)
AWS_QWEN3_FIRST_PRICED = {
    "aws-p5-qwen3-30b-a3b-ep16-tp8pp4dp2-mb4-ovloff-nccl": +0.602,
    "aws-p5-qwen3-30b-a3b-ep16-tp8pp4dp2-mb1-ovloff-nccl": +2.783,
    "aws-p5-qwen3-30b-a3b-ep16-tp8pp4dp2-mb4-ovlon-nccl": +1.638,
    "aws-p5-qwen3-30b-a3b-ep32-tp8pp2dp4-mb4-ovloff-nccl": +0.432,
    "aws-p5-qwen3-30b-a3b-ep32-tp8pp2dp4-mb1-ovloff-nccl": +1.727,
    "aws-p5-qwen3-30b-a3b-ep32-tp8pp2dp4-mb4-ovlon-nccl": +1.118,
}


def test_aws_qwen3_rows_are_the_set_drawn_held_out_as_first_priced():
    """17 rows, 6 scored: Qwen3-30B-A3B on 64 H100 over EFA (priced on dgx-h100's InfiniBand), ep 16-32 with NCCL's
    all-to-all, their steps 1.43-3.78x the predicted; the DeepEP arms excluded."""
    assert_held_out_set(AWS_QWEN3, AWS_QWEN3_ROWS_SHA256, AWS_QWEN3_MODELS_SHA256, 17, ("dgx-h100",),
                        "aws-p5-qwen3-30b", AWS_QWEN3_FIRST_PRICED)


# Ant Group's ATorch Llama-2-7B table (the fifty-ninth sitting's fourth draw): drawn by a helper who priced nothing,
# reviewed (every row on hardware_profiles/a100-rdma800.yaml, written for its README's 800 Gb/s a node) and
# committed before the first pricing (results/2026-12-05f-intel-xeon/atorch-heldout.txt), the third addendum to
# the expectations before that
ATORCH = "results/published/atorch_llama2_figures.yaml"
ATORCH_ROWS_SHA256 = "9e858256a79e28eaa00577a5abeca51b478c5955b128d560a96594fd567af4c7"
ATORCH_MODELS_SHA256 = {
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
}
# the profile written for it before any pricing: its rows' prices barely feel its network (FSDP's gathers hide under
# the compute), so the file itself is pinned
A100_RDMA800_SHA256 = "c00d87dcd4b16040cc34bcdab43900545269d65d3d84ae126465b109b086bad2"
# each scored row's step-time error when first priced (atorch-heldout.txt)
ATORCH_FIRST_PRICED = {
    "atorch-llama2-7b-fsdp-8gpu-mbs4-gbs32": -0.070,
    "atorch-llama2-7b-fsdp-16gpu-mbs4-gbs64": -0.041,
    "atorch-llama2-7b-fsdp-32gpu-mbs4-gbs128": -0.036,
    "atorch-llama2-7b-fsdp-64gpu-mbs4-gbs256": -0.032,
    "atorch-llama2-7b-ds3d-tp1pp2dp4-8gpu-mbs8-gbs2048": -0.014,
    "atorch-llama2-7b-ds3d-tp2pp1dp4-8gpu-mbs8-gbs2048": +0.163,
    "atorch-llama2-7b-ds3d-tp2pp2dp2-8gpu-mbs8-gbs1024": +0.151,
    "atorch-llama2-7b-ds3d-tp2pp2dp4-16gpu-mbs8-gbs2048": +0.157,
    "atorch-llama2-7b-ds3d-tp2pp2dp8-32gpu-mbs8-gbs4096": +0.160,
    "atorch-llama2-7b-ds3d-tp2pp2dp16-64gpu-mbs8-gbs8192": +0.163,
}


def test_atorchs_rows_are_the_set_drawn_held_out_as_first_priced():
    """14 rows, 10 scored: Llama-2-7B under torch FSDP and DeepSpeed's pipeline engine on 8-64 A100, their steps
    0.93-0.97x the predicted under FSDP and 0.99-1.16x under the pipeline engine; the LoRA rows excluded."""
    assert file_sha256(profile_path("a100-rdma800")) == A100_RDMA800_SHA256
    assert_held_out_set(ATORCH, ATORCH_ROWS_SHA256, ATORCH_MODELS_SHA256, 14, ("a100-rdma800",),
                        "atorch-llama2-perf", ATORCH_FIRST_PRICED)


# Alibaba's Megatron-LLaMA README (the sixtieth sitting's draw): drawn by a helper who priced nothing, reviewed (the
# OverlappedDistributedOptimizer rows zero 2, read from its code) and committed with its expectations before the
# first pricing (results/2026-12-05g-intel-xeon/preregistered.md, megatron-llama-heldout.txt); on a100-rdma800,
# whose file the ATorch test pins
MEGATRON_LLAMA = "results/published/megatron_llama_figures.yaml"
MEGATRON_LLAMA_ROWS_SHA256 = "20de1240a55f031116a42a7b866c3aa632f09abfac34679b2e5851e36e64a407"
MEGATRON_LLAMA_MODELS_SHA256 = {
    "examples/llama2_13b/config.json": "ca133a37bfd7c5c3354037d6f08475db7b5fa48635088ab1d081bccb68f1d035",
}
# each scored row's throughput error when first priced (megatron-llama-heldout.txt; + is a price too fast)
MEGATRON_LLAMA_FIRST_PRICED = {
    "megatron-llama-13b-do-tp2pp1dp16-32gpu-mbs4-gbs2048": +0.113,
    "megatron-llama-13b-odo-tp2pp1dp128-256gpu-mbs4-gbs2048": +0.197,
    "megatron-llama-13b-odo-tp2pp1dp256-512gpu-mbs4-gbs2048": +0.207,
    "megatron-llama-13b-do-tp2pp1dp128-256gpu-mbs4-gbs2048": +0.306,
    "megatron-llama-13b-do-tp2pp1dp256-512gpu-mbs4-gbs2048": +0.296,
}


def test_megatron_llamas_rows_are_the_set_drawn_held_out_as_first_priced():
    """6 rows, 5 scored: LLaMA-13B under Alibaba's Megatron-LM fork on 32-512 A100, priced 11-31% too fast; the HF +
    DeepSpeed ZeRO-2 row excluded (no settings)."""
    assert_held_out_set(MEGATRON_LLAMA, MEGATRON_LLAMA_ROWS_SHA256, MEGATRON_LLAMA_MODELS_SHA256, 6,
                        ("a100-rdma800",), "alibaba-megatron-llama", MEGATRON_LLAMA_FIRST_PRICED)


# KempnerForge's FSDP2 reports (the sixtieth sitting's second draw): drawn by a helper who priced nothing, reviewed
# (every zero 3 row no_sync: true, FSDP2's gradient sync once a step, which parsim expressed first, 56cf180) and
# committed with the addendum to the expectations before the first pricing (kempnerforge-heldout.txt); on dgx-h200
# at 4 GPUs a node
KEMPNERFORGE = "results/published/kempnerforge_bench_figures.yaml"
KEMPNERFORGE_ROWS_SHA256 = "2f2cfa1b1ce201fd9463130140979bc45eca645a8f286562dee762c34443cca9"
KEMPNERFORGE_MODELS_SHA256 = {
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
    "examples/llama3_70b/config.json": "75807d84c3a1f0637db824170ffa2dcf9d73aa49d4f53656b6710b7808601fb8",
}
# each scored row's step-time error when first priced (kempnerforge-heldout.txt; + is a price too fast)
KEMPNERFORGE_FIRST_PRICED = {
    "kforge-mfu03-7b-2gpu-tp2": +0.202,
    "kforge-mfu04-7b-4gpu-fsdp4": -0.128,
    "kforge-mfu05-7b-4gpu-tp4": +0.083,
    "kforge-mfu06-7b-4gpu-tp2fsdp2": +0.204,
    "kforge-mfu07-7b-8gpu-tp4fsdp2": +0.179,
    "kforge-mfu08-13b-8gpu-fsdp8": -0.060,
    "kforge-mfu09-13b-8gpu-tp4fsdp2": +0.105,
    "kforge-mfu10-7b-16gpu-tp4fsdp4": +0.238,
    "kforge-mfu11-13b-16gpu-tp4fsdp4": +0.106,
    "kforge-mfu12-7b-32gpu-tp4fsdp8": +0.303,
    "kforge-mfu13-13b-32gpu-tp4fsdp8": +0.133,
    "kforge-mfu14-70b-32gpu-tp4fsdp8": +0.226,
    "kforge-weak-13b-8gpu-tp4fsdp2": +0.013,
    "kforge-weak-13b-32gpu-tp4fsdp8": +0.070,
    "kforge-weak-13b-64gpu-tp4fsdp16": +0.084,
    "kforge-weak-13b-128gpu-tp4fsdp32": +0.102,
    "kforge-weak-13b-160gpu-tp4fsdp40": +0.091,
    "kforge-weak-70b-8gpu-tp4fsdp2": +0.837,
    "kforge-weak-70b-32gpu-tp4fsdp8": +0.158,
    "kforge-weak-70b-64gpu-tp4fsdp16": +0.129,
    "kforge-weak-70b-96gpu-tp4fsdp24": +0.132,
    "kforge-weak-70b-128gpu-tp4fsdp32": +0.106,
    "kforge-weak-70b-160gpu-tp4fsdp40": +0.117,
    "kforge-175b-360gpu-tp4fsdp90": -0.126,
}


def test_kempnerforges_rows_are_the_set_drawn_held_out_as_first_priced():
    """26 rows, 24 scored: Llama-3-shaped 7B-175B under FSDP2 (beside TP 4 inside a node) on 2-360 H200, their steps
    0.87-1.30x the predicted but the 70B's on 8 GPUs (1.84x, at 128.5 of 141 GB); two rows excluded (their
    micro-batch not established)."""
    assert_held_out_set(KEMPNERFORGE, KEMPNERFORGE_ROWS_SHA256, KEMPNERFORGE_MODELS_SHA256, 26, ("dgx-h200",),
                        "kempnerforge-bench", KEMPNERFORGE_FIRST_PRICED)


# NVIDIA NeMo's Long Sequence Performance page (the sixtieth sitting's third draw): drawn by a helper who priced
# nothing, committed with the second addendum to the expectations before the first pricing
# (nemo-longseq-heldout.txt; the excluded cells' stand-in plans run gpipe where m < pp, fixed during it)
NEMO_LONGSEQ = "results/published/nemo_longseq_figures.yaml"
NEMO_LONGSEQ_ROWS_SHA256 = "6b8ab9fe87631aa4f454021832690510d95f6647c6cc7b700d59e55e2fb4f4ef"
NEMO_LONGSEQ_MODELS_SHA256 = {
    "examples/llama2_7b/config.json": "94d4fc496d313f804d83881bf03084b176d4dd8c1a2d5feb4b3aedd7070f5721",
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
}
# each scored row's step-time error when first priced (nemo-longseq-heldout.txt; + is a price too fast)
NEMO_LONGSEQ_FIRST_PRICED = {
    "nemo-longseq-h100-llama2-7b-16k-16gpu-cp1": +0.183,
    "nemo-longseq-h100-llama2-7b-32k-32gpu-cp2": +0.314,
    "nemo-longseq-h100-llama2-7b-64k-64gpu-cp2": +0.363,
    "nemo-longseq-h100-llama2-7b-128k-128gpu-cp4": +0.399,
    "nemo-longseq-h100-llama2-7b-256k-256gpu-cp8": +0.465,
    "nemo-longseq-h100-llama2-7b-512k-512gpu-cp16": +0.458,
    "nemo-longseq-h100-llama2-7b-1024k-1024gpu-cp32": +0.522,
    "nemo-longseq-b200-llama3-8b-16k-4gpu-cp1": +0.118,
    "nemo-longseq-b200-llama3-8b-32k-8gpu-cp2": +0.201,
    "nemo-longseq-b200-llama3-8b-64k-16gpu-cp4": +0.241,
    "nemo-longseq-b200-llama3-8b-128k-32gpu-cp4": +0.243,
    "nemo-longseq-b200-llama3-8b-256k-64gpu-cp4": +0.212,
    "nemo-longseq-b200-llama3-8b-512k-128gpu-cp8": +0.218,
    "nemo-longseq-b200-llama3-8b-1024k-256gpu-cp16": +0.242,
}


def test_nemo_long_sequence_rows_are_the_set_drawn_held_out_as_first_priced():
    """25 rows, 14 scored: Llama-2-7B on H100 and Llama-3-8B on B200 in FP8 at 16K-1024K tokens under context
    parallelism, their steps 1.18-1.52x the predicted on H100 (growing with the sequence) and 1.12-1.24x on B200;
    the cells without CP excluded (their layouts not printed)."""
    assert_held_out_set(NEMO_LONGSEQ, NEMO_LONGSEQ_ROWS_SHA256, NEMO_LONGSEQ_MODELS_SHA256, 25,
                        ("dgx-h100-superpod", "dgx-b200"), "nemo-longseq", NEMO_LONGSEQ_FIRST_PRICED)


# MLPerf Training v3.0's GPT-3 175B results (the sixty-first sitting's first draw): drawn by a helper who priced
# nothing, committed with the expectations before the first pricing (results/2026-12-05h-amd-epyc/
# mlperf-training-heldout.txt); the zoo GPT, no model file
MLPERF = "results/published/mlperf_training_figures.yaml"
MLPERF_ROWS_SHA256 = "64826647e66b8e4200632690d54a8cbd8d6b6d03444de9f8ffa0090da70d9076"
# each scored row's step-time error when first priced (mlperf-training-heldout.txt; + is a price too fast)
MLPERF_FIRST_PRICED = {
    "mlperf-v30-gpt3-nvidia-dgxh100-n64": +0.087,
    "mlperf-v30-gpt3-nvidia-dgxh100-n96": +0.091,
    "mlperf-v30-gpt3-coreweave-hgxh100-n192": +0.100,
    "mlperf-v30-gpt3-coreweave-hgxh100-n448": +0.070,
    "mlperf-v30-gpt3-coreweave-hgxh100-n96": +0.106,
}


def test_mlperfs_gpt3_rows_are_the_set_drawn_held_out_as_first_priced():
    """5 rows, all scored: GPT-3 175B in FP8 on 512-3,584 H100 (tp 4, pp 8 interleaved 12), the median of the
    logs' per-step times; their steps 1.07-1.11x the predicted."""
    assert_held_out_set(MLPERF, MLPERF_ROWS_SHA256, {}, 5, ("dgx-h100-superpod",), "mlperf-training",
                        MLPERF_FIRST_PRICED)


# torchtitan's context-parallel tables (the sixty-first sitting's second draw): drawn by a helper who priced
# nothing, committed with the expectations before the first pricing, which stopped at Table 6's first row (FSDP2
# beside pp 8, not expressible then: its four rows excluded with stand-in plans, the addendum); on grand-teton-h100.
# The sixty-second sitting expressed them (zero 2 beside pp, torchtitan's FSDP under PP) and priced them once
# after its own expectations (results/2026-12-06-amd-epyc/preregistered.md)
LONGCTX_TT = "results/published/longctx_torchtitan_cp_figures.yaml"
LONGCTX_TT_ROWS_SHA256 = "d9bedfb755682a8f53b10a7b3117d567785aefc07d5d3bc8f77c79305d43c3ec"
LONGCTX_TT_MODELS_SHA256 = {
    "examples/llama3_8b/config.json": "3ecf9f07d09f6fdc0d91db46ec9b765a44ee78590cfb5bc293f7cdeb1b33e72b",
    "examples/llama3_405b/config.json": "84ad29cc732c08f3069e738111eb5248b7ff9c0aaf0e58ea244ecb49de7bff82",
}
# each scored row's throughput error when first priced (longctx-torchtitan-cp-heldout.txt, the 405B's
# longctx-torchtitan-cp-405b-heldout.txt; + is a price too fast)
LONGCTX_TT_FIRST_PRICED = {
    "longctx-tt-llama31-8b-8gpu-32k-fsdp8-cp1": +0.645,
    "longctx-tt-llama31-8b-8gpu-64k-fsdp4-cp2": +0.710,
    "longctx-tt-llama31-8b-8gpu-128k-fsdp2-cp4": +1.467,
    "longctx-tt-llama31-8b-8gpu-256k-fsdp1-cp8": +1.705,
    "longctx-tt-llama31-405b-512gpu-32k-fsdp8-cp1": +0.332,
    "longctx-tt-llama31-405b-512gpu-64k-fsdp4-cp2": +0.738,
    "longctx-tt-llama31-405b-512gpu-128k-fsdp2-cp4": +0.905,
    "longctx-tt-llama31-405b-512gpu-256k-fsdp1-cp8": +1.383,
}


def test_torchtitans_context_parallel_rows_are_the_set_drawn_held_out_as_first_priced():
    """8 rows, all scored: Llama 3.1 8B on 8 H100 under FSDP2 x CP (allgather) at 32K-256K tokens, priced 1.6-2.7x
    too fast, more as the sequence grows; the 405B on 512 (FSDP2 beside tp 8 and 8 pipeline stages, zero 2 beside
    pp) 1.3-2.4x."""
    assert_held_out_set(LONGCTX_TT, LONGCTX_TT_ROWS_SHA256, LONGCTX_TT_MODELS_SHA256, 8, ("grand-teton-h100",),
                        "longctx-torchtitan-cp", LONGCTX_TT_FIRST_PRICED)
