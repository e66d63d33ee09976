"""The validation sets under results/heldout/ are frozen: each file and every model file it names
hash to what was committed when the set was drawn, and their content (names, rules, plans,
model sizes) is checked, not only their names.  Sets 2026-11-27, moe-2026-11-27, -27b and -27c
are development sets since their first reports; 2026-11-27b (dense) and moe-2026-11-27d (MoE)
were held out when drawn; 2026-11-28 and 2026-11-28b (dense) are development sets since their
runs set the CPU intervals; 2026-11-28c (dense) is held out; 2026-11-28d (dense) was held out
until the host-noise term of the CPU intervals, which its third report motivated; 2026-12-06
(dense) was drawn to measure that term; 2026-12-06b (dense) was drawn before any change set
2026-12-06's second report could motivate; 2026-12-06c (dense) before any change set 2026-12-06b's first report
could motivate; 2026-12-06d (dense) before the pipeline memory's change set 2026-12-06b's DenseNet-BC
motivated, a development set for it since its first report; 2026-12-06e (dense) before the gradient torch's
1F1B keeps between two backwards' sends was priced; 2026-12-06f (dense) before the sends torch's runtime schedules
keep until the step ends were priced; 2026-12-06g (dense) before what torch's last stage frees at a split
backward's I was priced; 2026-12-07 (dense) before attention's dropout was priced as a CPU runs it; 2026-12-07b
(dense) before any change to the step time of pipeline schedules on a CPU.
Every model loads and extracts, its torch module runs one forward on the executor's input kind, and
every plan (the planner's pick too, kept to
the set's sizes as validate keeps it) resolves and simulates.  Nothing here runs a plan: the
set's figures come only from the runs its rule allows."""

import json

import pytest
import torch

from parsim.cost.compute import AnalyticalCompute
from parsim.errors import InputError
from parsim.exec.data import input_kind
from parsim.hardware import load_cluster
from parsim.model.spec import build_module, load_model
from parsim.sim import simulate
from parsim.validation import case_microbatch_sizes, default_cases
from parsim.validation_sets import load_plan_set

from drawn_sets import file_sha256

SET = "results/heldout/2026-11-27.yaml"
HELD = load_plan_set(SET)
SET_B = "results/heldout/2026-11-27b.yaml"
MOE = "results/heldout/moe-2026-11-27.yaml"
MOE_B = "results/heldout/moe-2026-11-27b.yaml"
MOE_C = "results/heldout/moe-2026-11-27c.yaml"
MOE_D = "results/heldout/moe-2026-11-27d.yaml"
SET_C = "results/heldout/2026-11-28.yaml"
SET_D = "results/heldout/2026-11-28b.yaml"
SET_E = "results/heldout/2026-11-28c.yaml"
SET_F = "results/heldout/2026-11-28d.yaml"
SET_G = "results/heldout/2026-12-06.yaml"
SET_H = "results/heldout/2026-12-06b.yaml"
SET_I = "results/heldout/2026-12-06c.yaml"
SET_J = "results/heldout/2026-12-06d.yaml"
SET_K = "results/heldout/2026-12-06e.yaml"
SET_L = "results/heldout/2026-12-06f.yaml"
SET_M = "results/heldout/2026-12-06g.yaml"
SET_N = "results/heldout/2026-12-07.yaml"
SET_O = "results/heldout/2026-12-07b.yaml"
SET_P = "results/heldout/2026-12-07c.yaml"
SET_Q = "results/heldout/2026-12-07d.yaml"
SET_R = "results/heldout/2026-12-07e.yaml"
SET_S = "results/heldout/2026-12-07f.yaml"
SET_T = "results/heldout/2026-12-07g.yaml"
SET_U = "results/heldout/2026-12-07h.yaml"
FROZEN = (SET, SET_B, MOE, MOE_B, MOE_C, MOE_D, SET_C, SET_D, SET_E, SET_F, SET_G, SET_H, SET_I, SET_J, SET_K,
          SET_L, SET_M, SET_N, SET_O, SET_P, SET_Q, SET_R, SET_S, SET_T, SET_U)
SETS = {path: load_plan_set(path) for path in FROZEN}
# the micro-batch sizes profiled in development: ResNet-50 and the GPT (1..32); then set 2026-11-27's
# bert-mini and llama-tiny (12, 6, 3), which became development rows.  The MoE sets' models are
# their own (each held-out one was never profiled in development): no size is excluded.
DEVELOPMENT_SIZES = {SET: {1, 2, 4, 8, 16, 32}, SET_B: {1, 2, 3, 4, 6, 8, 12, 16, 24, 32},
                     MOE: set(), MOE_B: set(), MOE_C: set(), MOE_D: set(),
                     SET_C: {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32},      # every size any set used before
                     SET_D: {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32},
                     SET_E: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 24, 28, 32, 36},
                     SET_F: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 18, 20, 22, 24, 28, 32, 36, 44},
                     SET_G: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 18, 20, 22, 24, 26, 28, 32, 36, 44, 52},
                     SET_H: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 26, 28, 30, 32, 36, 44,
                             52, 60},
                     SET_I: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 20, 22, 24, 26, 28, 30, 32, 34,
                             36, 44, 52, 60, 68},
                     SET_J: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 24, 26, 28, 30,
                             32, 34, 36, 38, 44, 52, 60, 68, 76},
                     SET_K: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 26, 28,
                             30, 32, 34, 36, 38, 42, 44, 52, 60, 68, 76, 84},
                     SET_L: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 26,
                             28, 30, 32, 34, 36, 38, 42, 44, 46, 52, 60, 68, 76, 84, 92},
                     SET_M: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 28, 30, 32, 34, 36, 38, 42, 44, 46, 50, 52, 60, 68, 76, 84, 92, 100},
                     SET_N: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 30, 32, 34, 36, 38, 42, 44, 46, 50, 52, 54, 60, 68, 76, 84, 92, 100, 108},
                     SET_O: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 29, 30, 32, 34, 36, 38, 42, 44, 46, 50, 52, 54, 58, 60, 68, 76, 84, 92, 100,
                             108, 116},
                     SET_P: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 29, 30, 31, 32, 34, 36, 38, 42, 44, 46, 50, 52, 54, 58, 60, 62, 68, 76, 84, 92,
                             100, 108, 116, 124},
                     SET_Q: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 29, 30, 31, 32, 34, 35, 36, 38, 42, 44, 46, 50, 52, 54, 58, 60, 62, 68, 70, 76,
                             84, 92, 100, 108, 116, 124, 140},
                     SET_R: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 38, 42, 44, 46, 50, 52, 54, 58, 60, 62, 66, 68,
                             70, 76, 84, 92, 100, 108, 116, 124, 132, 140},
                     SET_S: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 42, 44, 46, 50, 52, 54, 58, 60, 62, 66,
                             68, 70, 74, 76, 84, 92, 100, 108, 116, 124, 132, 140, 148},
                     SET_T: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 42, 44, 46, 50, 52, 54, 58, 60, 62,
                             66, 68, 70, 74, 76, 78, 84, 92, 100, 108, 116, 124, 132, 140, 148, 156},
                     SET_U: {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                             26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 41, 42, 44, 46, 50, 52, 54, 58, 60,
                             62, 66, 68, 70, 74, 76, 78, 82, 84, 92, 100, 108, 116, 124, 132, 140, 148, 156, 164}}

# sha256 of each set file and of every file its models are read from, as committed when the set
# was drawn (git log -- results/heldout/): a set whose file or model changed is no longer the set
# its reports measured.  Adding a set means adding its hashes here, in the commit that draws it.
SHA256 = {
    SET: "93e6d9ac5409d3823b990affb72a0704aacf0a831360b3321ce1e643d6695c7d",
    SET_B: "5f2b216614f9e0cfaf40d0afba879983970b7abf37d6a4510aced245f400e46d",
    MOE: "ce6fc542c6d641ff91a0ebd4d323ce789856174e8e3b195b156a2f3d5ca0e338",
    MOE_B: "2b7400f6ef478d5a0ed7ecfb80610a4de80cd7b3bb053318c2f5ae68778a5686",
    MOE_C: "bccfd39764333f704261702309aea6c08ae45cbeff62aa811578f9f71d90af02",
    MOE_D: "22ec6f6e9bb737a7ba8da883fd3008d2bbd4fb7171b5be50f9730e3cdf11b59f",
    SET_C: "e588c3ccea2c8efe4099aa8f8773452f32b0cd385aeed35f01a347da566a6e69",
    SET_D: "c0b074a03213f3eb0be04788140d171e2ac2ca336d970cc1d3997e91ea709de9",
    SET_E: "e969e77b2887356d73d4b13aa9cea2521a1f17fe6e131b418cd337df68f7fd09",
    SET_F: "8bda0477fd8b95080dcadea5141550211c1a767144d25de2d43b82e8b4ab0289",
    SET_G: "d880848539b96a09545d2836489d0064fcea1a3eab860663ebcba9a0e4119247",
    SET_H: "e8a9705ade3b0e80bde476563c7c4193723bcdcd54b8c90c623d4eee8acb91d7",
    SET_I: "a6492be42580e8943a45e13a25a696c340543cdd90f8e57d8ceb808eb3eec837",
    SET_J: "dbd3d8487e21e3fe3f04b0e50b4d9b078e86a0e069381af98eb6df5012ae8c66",
    SET_K: "152da829c0f2b7b8b45ef9be8b06321a3d57a695e77dbf768f786e545c3d0ff1",
    SET_L: "61f49bd3c082f94050356b5c9ce0ac6cbba15d4879d80081d4298e5fbe0c3e49",
    SET_M: "2135ee38b604737e74d4e52acc840263be99536bae544813dc3e4b89bef8ab61",
    SET_N: "ef82c63fbe7183962c71a825ad98f172cf0ffd68119ce710e226e27cc75ccf82",
    SET_O: "f93bebadc9f29cac965aef2f71a91698e0c08c84a3d21559a0cbffa9d000a22e",
    SET_P: "71d69931954dcbbb3757e192a40b63e03defb06f8495a9eb563b180655273a46",
    SET_Q: "c77ebbacf40c4ba0cb9c13e71b57a236d1fe002776ec157c60db237b1ed34791",
    "results/heldout/models/starcoder2_relu2_tiny.yaml": "e30a27ed8e950d7ba31b5d1da8eacba529961c07392f8567d9a3b934eb6fdb62",
    "results/heldout/models/llama_relu2_tiny.yaml": "cc9c3f6c252460ecaa7780869cab38da4a751fa6ac755ba9382b8c36aa0e7496",
    "results/heldout/models/qwen3_relu_tiny.yaml": "3a06f3bbae91fd19f1cf3c14b826740789e18138895e7e22bba3b523710e171c",
    SET_R: "706914f6764a915c2349436039a41a570cd7ae25dc4124c6d4f87a1503c4564e",
    "results/heldout/models/hyperclovax_tiny.yaml": "5c6e39134146f0c8a46bd66393ab84c7b19363b550843c767f40892fd49069c7",
    "results/heldout/models/gemma2_tiny.yaml": "fa91172c36d0155bc539c9c61dd9a9b8cb3f90956e3657e576ff8023bae82b68",
    "results/heldout/models/qwen2_control_tiny.yaml": "01113f1a35c6b4e48cb7cd79ab95a071057f2c4b690a14437508fb6444af4775",
    SET_S: "3b4552a944a1a9dc3ee4a1e8f296fd594e4eef9e18eb787d0a9ab5ddea654045",
    "results/heldout/models/nanochat_tiny.yaml": "7c505f6a1f184d68f66a01624ccaba1491c7d300e826b966ea91040192dd5c3d",
    "results/heldout/models/iquestcoder_tiny.yaml": "1d256b4afcafa077b39e13192fcf040a0acaa738be2bc6078dd7bb426a25cf0a",
    "results/heldout/models/diffllama_tiny.yaml": "054c528f7f6a293668b3db76a241afad0610233b6c70c3fe4226079cdd4f9fc7",
    SET_T: "6c4f9330c71dab0a18f3c5be648f93123d9158648ed997783d5b9afc47baf318",
    "results/heldout/models/youtu_tiny.yaml": "847381931c5bc62b78fe4e3088978bf89ac94a2b84cf30910e247794a7d815f8",
    "results/heldout/models/vaultgemma_tiny.yaml": "0bb6c9e0969533ffd4b902658b877c84c868d95e1cfb8fd4d313884d00a226a5",
    "results/heldout/models/llama_bias_control_tiny.yaml": "aa8601d033bfb8104aef01f7efd8b9e4bab2f76999eaf4b3d794689b32f04e4d",
    SET_U: "2ec311be6826ae76cde17a0896b7ab50d29498d5c668c51d64d05e400d005e97",
    "results/heldout/models/gemma3_tiny.yaml": "787907146e0cd49360310947cf151b5e92881ad60b76d3ac3ce34f51ddac2790",
    "results/heldout/models/olmo3_tiny.yaml": "4f7fc04491397e8496c3b1223f85bbbf89159467eea07ff242d4f4c311142aa9",
    "results/heldout/models/mistral_control_tiny.yaml": "9619ee5ebb1f6dc27f66d4e60ae01333b93e8b2e387abd06cfd73d68744c4fb6",
    "results/heldout/models/cohere2_tiny.yaml": "c0e4b2ebac1c3ae492456d56ae171c54da05814873ca43532985b90581ce2402",
    "results/heldout/models/cwm_tiny.yaml": "81781bde4afafa47a9219e0ded755a103106b42e730b1aa270111ad3e0ad21c3",
    "results/heldout/models/phi3_window_tiny.yaml": "770af6d02bb7bf8d452f161aaab898da1350a5854e0487e3cef761d77fc102bb",
    "results/heldout/models/internlm3_tiny.yaml": "cc9a692893fc384d8a35cfbb67ac9eef80959e1af8649f223dea024e4522d2cf",
    "results/heldout/models/ministral_tiny.yaml": "9d40aa1c42fe0196ef9b0eb8073a32a1d174dd8dcd0231252dd525cbb5a60b59",
    "results/heldout/models/bitnet_tiny.yaml": "bb67512ee4eb1d5efc7c00981f03796a7c2c1806dd8840ded1c1da2ec7e5a155",
    "results/heldout/models/glm_tiny.yaml": "4183b382d3653832af5e17f3d0688b605e38ee56d18a3a865e106cf1609fb395",
    "results/heldout/models/apertus_tiny.yaml": "e572d61b3d3ad6f01638e46ce69f2cafbd65c8ed276f68a9c10e92fc08d88b72",
    "results/heldout/models/deepseek_v2_dense_tiny.yaml": "2a61e8b5498cf1bcca922d89c5c83339a455e1089bdea77fb1a3cc79f0f7506c",
    "results/heldout/models/mistral_tiny.yaml": "6381780321fb5f11f2851029608110f9d5d06a63a1cf63426df2e96c0e955dbe",
    "results/heldout/models/hunyuan_dense_tiny.yaml": "1b35fe341904a7ca79eaee71810046d93e904f6e489a5f3bdcf02b89c3c82cbf",
    "results/heldout/models/jais2_tiny.yaml": "32116bf13487467a55e66949d22717e0b21bd55eefdaebab567d2006780274fa",
    "results/heldout/models/convmixer_cifar.yaml": "1b69323f310c71688020c6c00cd84e55accc958cd6e5580794a0afe9638bd07d",
    "results/heldout/models/seed_oss_tiny.yaml": "539a88b4453bf7f532fa7b22b891b96fa5a45221b0dd9b618065d09f32299ff0",
    "results/heldout/models/ernie45_tiny.yaml": "635c1c3c41667a03057161187935f01315b72e8504f1fcae125b3aaeaa4ac825",
    "results/heldout/models/preact_resnet_cifar.yaml": "fe47c4e3a64430fae54deacc855f6df7a7e6a25ffc5621306499684fdce0b82c",
    "results/heldout/models/xception_cifar.yaml": "18c1643a18b41273b35889ae63d454caf768caa09d74507c8aba9750425d0e60",
    "results/heldout/models/helium_tiny.yaml": "142547e7b40446ad453b60a064f0059e3514ecdccfa2e8bb28eacbddfd1fdcc6",
    "results/heldout/models/inception_cifar.yaml": "dd1ed5a98504b8b31fdb5d512626bd7cb396e0b454c98eb3903f8036d81137f1",
    "results/heldout/models/granite_tiny.yaml": "b92010f83c1e18d89e7353b109f3558f3104e8ef080a0960f78689b6fdc88b87",
    "results/heldout/models/arcee_tiny.yaml": "fb477838a7896b0d7f751678cf854e515b02f8fcc8a2efb09f9d2693f236ebe4",
    "results/heldout/models/regnety_cifar.yaml": "889d9e2a7bbe07c9b5c59a2e2cb41a219638d65c420c158af0b9ffbff6e8ccb6",
    "results/heldout/models/smollm3_tiny.yaml": "c6e290f3e586af7c61a64e988957c7ee454db3a70abc9c363d0890dc76db429d",
    "results/heldout/models/olmo_tiny.yaml": "e9abfa393d8e003e12fd300d7d530e09166cffc2e2750c1814b97cec132ff126",
    "results/heldout/models/densenet_bc_cifar.yaml": "d73b5d2235a3143f48aef2092e665fad33fc829514b7e8887176c3d4a7fb4da8",
    "results/heldout/models/glm4_tiny.yaml": "04b0238fb21f582d2e2accd7803846cfeba4f4f60aefccb78d689c74dac9abfb",
    "results/heldout/models/exaone4_tiny.yaml": "5a25ec140a9c6d50a69c4b49b885ea54d3ba50619d0c3af280cd799203e83bca",
    "results/heldout/models/resnext_cifar.yaml": "aa02a50769b0f9edabb4ad404c1f8e667b3f60b27d3022c5e12b6d1e5e35dde1",
    "results/heldout/models/stablelm_tiny.yaml": "99dcb7dd828e20e8a40a9a847505da0114b0bdde6865b04df923b451aa2ca5e2",
    "results/heldout/models/nemotron_tiny.yaml": "c13e61a59f0bc201e6b04f198e8c19da71208e8d38562371c68d4e7e60cd5adc",
    "results/heldout/models/shufflenet_v2_cifar.yaml": "241e4ae69f1f86e97958128be9f5eeee43da6a1defe0e394f99dd7d7aa0bdd41",
    "results/heldout/models/cohere_tiny.yaml": "ac8a35203bda3e1900943cb5b4bf7c523fb1ce79518200fc6d97c98303ae5f48",
    "results/heldout/models/olmo2_tiny.yaml": "42558398e78e284fe6329a7a18a0e9d9bbcff4fab0c72720b531f60972e46e45",
    "results/heldout/models/squeezenet_cifar.yaml": "d587b5f9026046c7939513cf6aca56966cadb89e3da8c62f0fe94794e968610d",
    "results/heldout/models/gemma_tiny.yaml": "272aacdd7e152de2b09e3212d22c02ec46183021416bc60774cfeafd03d00864",
    "results/heldout/models/phi3_tiny.yaml": "62b5892bd7b71bf0d55cdeacb14754c63a067116f1c5e4e584a0d631d1719f94",
    "results/heldout/models/vgg11_bn_cifar.yaml": "79256c001dbb5cb124c1ffa8200086f70148b23a308177f5951913b35137cc4e",
    "results/heldout/models/mixer_cifar.yaml": "9c5a954e3df4e83e6abd59de49560ac917cf210e500c940f47fb443f8c0f4110",
    "results/heldout/models/starcoder2_tiny.yaml": "8a71076f10831c8fb5c4824f9b23ca92dce928e6e3feae9279550f55019243db",
    "results/heldout/models/resnet18_seq_w24.yaml": "975d1fc476e2c38d6d9e6fae03862545197950b882e62de496331983da7f2b02",
    "results/heldout/models/convnext_cifar.yaml": "7e7de64582e6f3b570356ae9a53a1df4780c8ad9f71d11696df0dc96755609f3",
    "results/heldout/models/qwen3_tiny.yaml": "01354cd6a0a4cf1e5e243d66972a20ae41e748256ad0b4f606f904e816b876a7",
    "results/heldout/models/bert_mini.yaml": "731d50267d0b05ea7494a4b0123ffe06d3e04dc503009fe01ba28ab47929ac09",
    "results/heldout/models/llama_tiny.yaml": "646cce222899cedd0724cca2ac7f3e9063c63279b924191804a775e147d24bb2",
    "results/heldout/models/mobilenet_v2_cifar.yaml": "7e36d8f78905d8097059313f0976bd4758b49b09142723619341049dcca86a27",
    "results/heldout/models/mobilenet_v2_w035.yaml": "8abec80b2498670af2d2b0fb343cd35d958d91d03c6b0b050057eb2f6096f964",
    "results/heldout/models/olmoe_small.yaml": "8df19e4288ef6ef3cbff860dfe33d05ede5cb115d152f6fd22888817d83061aa",
    "results/heldout/models/qwen2_moe_small.yaml": "fc912042810ea150daa81bf4f618864650996cd008cb3671ca6eb8e69d2a5be4",
    "results/heldout/models/qwen2_tiny.yaml": "c1534ddc64c27bd295025d96bca826d28b51477cba548b8f71cb5669035a3a1d",
    "results/heldout/models/qwen3_moe_small.yaml": "94153dffc50a49bde8fae7b97f0bcd183f7d9e34584a52f2eb29365f6e24e3c2",
    "results/heldout/models/vit_tiny_cifar.yaml": "cd18a7ca2e00cad86cd8cf66c5bf6cfcc1b072917b0f1c645c2d6e0dfe9d81f3",
    "results/heldout/models/vit_w256_cifar.yaml": "b18a7805851c3329941da92de623afb28a8d00ba1e829cc1740427b7ae37e5de",
    "examples/moe_tiny_local.yaml": "53c3ffed198edc247ee481b5205aa665f5175f98f3382875311b3a56b2056362",
    "examples/moe_tiny_local/config.json": "81e6f0dc0670640c99b112a4524e73663a642c1e90736afb7b4e646843dc1349",
}
L_RUNTIME = ["single", "dp2", "pp2-1f1b-m4", "pp2-interleaved-m4", "pp2-zbh1-m4"]     # set 2026-12-06f's plans
M_SPLIT = ["single", "dp2", "pp2-1f1b-m4", "pp2-zbh1-m4", "pp2-zbh1-m2"]                # set 2026-12-06g's plans
# sets 2026-12-07's to -07h's plans
N_DROPOUT = ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4", "pp2-zbh1-m4"]
# (name, date, [(model, parameters, plan labels)]) of each set: the models built from code
# (parsim.model.zoo.heldout, transformers' classes) must keep their size as well as their files
CONTENT = {
    SET: ("heldout-2026-11-27", [
        ("results/heldout/models/vit_tiny_cifar.yaml", 2693194, ["single", "dp2", "pp2-gpipe-m4", "pp2-1f1b-m8"]),
        ("results/heldout/models/mobilenet_v2_cifar.yaml", 590410, ["single", "dp2", "pp2-gpipe-m4", "pp2-1f1b-m8"]),
        ("results/heldout/models/bert_mini.yaml", 4292864, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/llama_tiny.yaml", 2410176, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_B: ("heldout-2026-11-27b", [
        ("results/heldout/models/qwen2_tiny.yaml", 1299712, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/vit_w256_cifar.yaml", 2140426, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/mobilenet_v2_w035.yaml", 296170, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    MOE: ("moe-2026-11-27", [("examples/moe_tiny_local.yaml", 337216, ["single", "dp2", "dp2-ep2", "pp2-1f1b-m4"])]),
    MOE_B: ("moe-2026-11-27b", [("results/heldout/models/qwen3_moe_small.yaml", 3478912,
                                 ["single", "dp2", "dp2-ep2", "dp2-ep2-m2", "pp2-1f1b-m4"])]),
    MOE_C: ("moe-2026-11-27c", [("results/heldout/models/qwen2_moe_small.yaml", 3877504,
                                 ["single", "dp2", "dp2-ep2", "dp2-ep2-m3", "pp2-1f1b-m4"])]),
    MOE_D: ("moe-2026-11-27d", [("results/heldout/models/olmoe_small.yaml", 5195904,
                                 ["single", "dp2", "dp2-ep2", "dp2-ep2-m2", "pp2-gpipe-m2"])]),
    SET_C: ("heldout-2026-11-28", [
        ("results/heldout/models/resnet18_seq_w24.yaml", 1575202, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/convnext_cifar.yaml", 908218, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/qwen3_tiny.yaml", 1301792, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_D: ("heldout-2026-11-28b", [
        ("results/heldout/models/vgg11_bn_cifar.yaml", 1300642, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/mixer_cifar.yaml", 569994, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/starcoder2_tiny.yaml", 1518720, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_E: ("heldout-2026-11-28c", [
        ("results/heldout/models/squeezenet_cifar.yaml", 727626, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/gemma_tiny.yaml", 1500480, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/phi3_tiny.yaml", 1770816, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_F: ("heldout-2026-11-28d", [
        ("results/heldout/models/shufflenet_v2_cifar.yaml", 352042, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/cohere_tiny.yaml", 1585920, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/olmo2_tiny.yaml", 1722816, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_G: ("heldout-2026-12-06", [
        ("results/heldout/models/resnext_cifar.yaml", 315946, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/stablelm_tiny.yaml", 1710720, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/nemotron_tiny.yaml", 1477248, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_H: ("heldout-2026-12-06b", [
        ("results/heldout/models/densenet_bc_cifar.yaml", 102730, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/glm4_tiny.yaml", 1650048, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/exaone4_tiny.yaml", 1783744, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_I: ("heldout-2026-12-06c", [
        ("results/heldout/models/regnety_cifar.yaml", 82732, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/smollm3_tiny.yaml", 1943232, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/olmo_tiny.yaml", 1818624, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_J: ("heldout-2026-12-06d", [
        ("results/heldout/models/inception_cifar.yaml", 57530, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/granite_tiny.yaml", 1783488, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/arcee_tiny.yaml", 2459392, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_K: ("heldout-2026-12-06e", [
        ("results/heldout/models/preact_resnet_cifar.yaml", 175066, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/xception_cifar.yaml", 42026, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"]),
        ("results/heldout/models/helium_tiny.yaml", 2188992, ["single", "dp2", "pp2-gpipe-m2", "pp2-1f1b-m4"])]),
    SET_L: ("heldout-2026-12-06f", [
        ("results/heldout/models/convmixer_cifar.yaml", 55290, L_RUNTIME),
        ("results/heldout/models/seed_oss_tiny.yaml", 2091968, L_RUNTIME),
        ("results/heldout/models/ernie45_tiny.yaml", 1918656, L_RUNTIME)]),
    SET_M: ("heldout-2026-12-06g", [
        ("results/heldout/models/mistral_tiny.yaml", 1732000, M_SPLIT),
        ("results/heldout/models/hunyuan_dense_tiny.yaml", 2213824, M_SPLIT),
        ("results/heldout/models/jais2_tiny.yaml", 2319744, M_SPLIT)]),
    SET_N: ("heldout-2026-12-07", [
        ("results/heldout/models/glm_tiny.yaml", 1712480, N_DROPOUT),
        ("results/heldout/models/apertus_tiny.yaml", 2090952, N_DROPOUT),
        ("results/heldout/models/deepseek_v2_dense_tiny.yaml", 2287936, N_DROPOUT)]),
    SET_O: ("heldout-2026-12-07b", [
        ("results/heldout/models/internlm3_tiny.yaml", 2000944, N_DROPOUT),
        ("results/heldout/models/ministral_tiny.yaml", 2238144, N_DROPOUT),
        ("results/heldout/models/bitnet_tiny.yaml", 1821600, N_DROPOUT)]),
    SET_P: ("heldout-2026-12-07c", [
        ("results/heldout/models/cohere2_tiny.yaml", 1893312, N_DROPOUT),
        ("results/heldout/models/cwm_tiny.yaml", 2336448, N_DROPOUT),
        ("results/heldout/models/phi3_window_tiny.yaml", 1844640, N_DROPOUT)]),
    SET_Q: ("heldout-2026-12-07d", [
        ("results/heldout/models/starcoder2_relu2_tiny.yaml", 2073728, N_DROPOUT),
        ("results/heldout/models/llama_relu2_tiny.yaml", 1803680, N_DROPOUT),
        ("results/heldout/models/qwen3_relu_tiny.yaml", 1660416, N_DROPOUT)]),
    SET_R: ("heldout-2026-12-07e", [
        ("results/heldout/models/hyperclovax_tiny.yaml", 1822128, N_DROPOUT),
        ("results/heldout/models/gemma2_tiny.yaml", 1661600, N_DROPOUT),
        ("results/heldout/models/qwen2_control_tiny.yaml", 2067392, N_DROPOUT)]),
    SET_S: ("heldout-2026-12-07f", [
        ("results/heldout/models/nanochat_tiny.yaml", 2260992, N_DROPOUT),
        ("results/heldout/models/iquestcoder_tiny.yaml", 2213568, N_DROPOUT),
        ("results/heldout/models/diffllama_tiny.yaml", 1919168, N_DROPOUT)]),
    SET_T: ("heldout-2026-12-07g", [
        ("results/heldout/models/youtu_tiny.yaml", 2165056, N_DROPOUT),
        ("results/heldout/models/vaultgemma_tiny.yaml", 1820352, N_DROPOUT),
        ("results/heldout/models/llama_bias_control_tiny.yaml", 2073024, N_DROPOUT)]),
    SET_U: ("heldout-2026-12-07h", [
        ("results/heldout/models/gemma3_tiny.yaml", 2610240, N_DROPOUT),
        ("results/heldout/models/olmo3_tiny.yaml", 2067136, N_DROPOUT),
        ("results/heldout/models/mistral_control_tiny.yaml", 2066112, N_DROPOUT)]),
}


def _files_of(path: str) -> list[str]:
    """The set file, each model file it names, and a Hugging Face config.json a model file names
    by path (the tiny Mixtral's)."""
    files = [path] + [model for model, _ in SETS[path].models]
    return files + (["examples/moe_tiny_local/config.json"] if "examples/moe_tiny_local.yaml" in files else [])


@pytest.mark.parametrize("path", FROZEN)
def test_the_set_and_its_models_hash_as_committed(path):
    for f in _files_of(path):
        assert file_sha256(f) == SHA256[f], f"{f} changed: a frozen set's files must not (draw a new set instead)"


@pytest.mark.parametrize("path", FROZEN)
def test_the_set_holds_what_was_drawn(path):
    held = SETS[path]
    name, models = CONTENT[path]
    assert held.name == name and held.date == name.removeprefix("heldout-").removeprefix("moe-")[:10]
    assert "new held-out set" in held.rule and "once per model change" in held.rule
    assert [m for m, _ in held.models] == [m for m, _, _ in models]
    for (model, plans), (_, params, labels) in zip(held.models, models):
        assert [p.label for p in plans] == labels
        assert sum(layer.param_count for layer in load_model(model).graph.layers) == params, model


def test_the_moe_held_out_set_is_another_model_with_expert_parallel_plans():
    """moe-2026-11-27d: none of the development sets' models (the tiny Mixtral, the Qwen3-MoE- and
    Qwen2-MoE-style ones), another model type, every decoder layer MoE, and ep=2 plans."""
    (path, plans), = SETS[MOE_D].models
    spec = load_model(path)
    assert spec.source.kind == "hf"
    for dev in (MOE, MOE_B, MOE_C):
        (dev_path, _), = SETS[dev].models
        assert path != dev_path
        assert load_model(dev_path).source.target != spec.source.target
    assert json.loads(spec.source.target)["model_type"] == "olmoe"
    assert all(layer.experts is not None for layer in spec.graph.layers if layer.name.startswith("layers."))
    assert {p.label for p in plans if p.ep == 2} == {"dp2-ep2", "dp2-ep2-m2"}


@pytest.mark.parametrize("set_path,path", [(s, p) for s, held in SETS.items() for p, _ in held.models])
def test_each_model_builds_runs_a_forward_and_every_plan_simulates(set_path, path):
    spec = load_model(path)
    cluster = load_cluster("local-cpu")
    held = load_plan_set(set_path)
    sizes = case_microbatch_sizes(spec, set_path)
    assert sizes and not set(sizes) & DEVELOPMENT_SIZES[set_path]
    kind = input_kind(spec)
    torch.manual_seed(0)
    module = build_module(spec.source, spec.path)
    if kind[0] == "tokens":
        _, seq, vocab = kind
        assert module(torch.randint(0, vocab, (2, seq))).shape == (2, seq, vocab)
    else:
        assert module(torch.randn(2, 3, kind[1], kind[1])).shape == (2, 10)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    skipped = []
    cases = default_cases(spec, cluster, compute, set_path, skipped, profiled_sizes=tuple(sizes))
    assert skipped == []
    assert [c.label for c in cases] == [p.label for p in held.plans_for(path)] + ["planner"]
    batch = spec.training.global_batch_size
    for case in cases:
        assert case.config.microbatch_size(batch) in sizes
        est = simulate(spec.graph, spec.training, cluster, case.config, compute, keep_timeline=False)
        assert est.step_time_s > 0


def test_a_model_the_set_does_not_hold_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"2026-11-27.yaml: models: no entry for examples/gpt_tiny_local.yaml"):
        HELD.plans_for("examples/gpt_tiny_local.yaml")
    bad = tmp_path / "s.yaml"
    bad.write_text("name: s\ndate: 2026-11-27\nrule: r\nmodels:\n  - model: m.yaml\n    plans: [{label: planner}]\n")
    with pytest.raises(InputError, match=r"models\[0\]\.plans: labels must be unique and not 'planner'"):
        load_plan_set(str(bad))


def test_a_set_plan_whose_ep_does_not_divide_dp_is_refused(tmp_path):
    bad = tmp_path / "set.yaml"
    bad.write_text("schema_version: 1\nname: x\ndate: 2026-11-27\nrule: r\nmodels:\n"
                   "  - model: examples/moe_tiny_local.yaml\n    plans:\n      - {label: a, dp: 2, ep: 4}\n")
    with pytest.raises(InputError, match=r"plans\[0\]\.ep: 4 does not divide dp 2"):
        load_plan_set(str(bad))
