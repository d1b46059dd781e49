"""The full default loop, timed: ingest -> eval base -> train -> eval tuned (bookft quickstart).

Prints a table (wall time per stage, accuracy per length and depth, base vs tuned, tokens/s) and
writes benchmarks/results/e2e.json with the machine it ran on and the notes of what worked.

    python benchmarks/e2e.py                       # the defaults (corpora/sample.yaml, configs/tiny-cpu.yaml)
    python benchmarks/e2e.py --draws 5             # five draws: seeds 0-4 for retrieval.seed, train.seed, data.seed
    python benchmarks/e2e.py --seeds 3 7           # chosen draws
    python benchmarks/e2e.py --set train.seed=1    # one override, one run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
NOTES = [
    # Written by hand from the tuning runs of sessions 2 and 3 (2026-11-30). Machine: this 2-core host,
    # shared with helper jobs (they ran at nice 10-19; the tuning runs at nice -5/-10).
    "Recipe (the defaults, session 3): tiny Llama 2x128 (4 heads, SwiGLU 352, vocab 1024 BPE) + a width-8 "
    "causal short convolution on the embeddings (model.short_conv, zero-initialised); NIAH phrasing "
    "'short' (answer prefix = the needle's words up to the value, so the answer is a copy); synthesized "
    "examples of 256/512/1024/2048 tokens at 90% of the corpus (shares 2:1:2:2), the question asked up to "
    "4 times while a quarter of the example stays context, the earlier askings in the last quarter after "
    "the fact (retrieval.ask_from 0.75), loss weight 1 on answers and 0.05 elsewhere; "
    "curriculum 256 x 300 -> 512 x 100 (lr x0.8) -> "
    "1024 x 150 (x0.7) -> 2048 x 150 (x0.6), 4,096 tokens per step, AdamW lr 2e-3 wsd (last 15% "
    "decayed), b2 0.98, wd 0.01, clip 1, 50 warm-up; ring attention over 4 simulated devices, xla kernel.",
    "Session 3 tuning runs (real Trainer on a corpus with 2048-token examples; eval = bookft eval niah "
    "teacher-forced, 10 seeds, depths 0/25/50/75/100%; all at load ~7 from helper jobs): "
    "d1 = session-2 defaults + a 2048 stage (256x300 -> 512x100 -> 1024x150 -> 2048x150): copy found by "
    "step 400; 1K 0.8/1/1/1/1, 2K 0/0/0.1/0.9/1; 1,282 s of training (2.0-2.3 s per 2048 step). "
    "d2 = d1 + a 64-token sliding window in LAYER 0 (the STACK-FACTS recipe's choice): never found the "
    "copy in 700 steps (answer exact match 0.0 throughout): with the short conv the copy is a one-layer "
    "job that needs layer 0's global view. d3 = d1 + the window in LAYER 1: copy found at step 400-500, "
    "1K 0.2/0.9/1/1/1, 2K 0/0/0/0.9/1 in 685 s of training (0.7 s per step at 256, 0.9-1.0 s at 2048).",
    "Session 3 full loops (python benchmarks/e2e.py): A = window in layer 1 with the time it saves spent on "
    "steps (256x400 -> 512x100 -> 1024x200 -> 2048x250, 950 steps): 994 s in all; 512 1/0.9/1/1/1, 1K "
    "0.4/0.9/1/1/1, 2K 0/0/0/0.9/1: faster but a shorter reach than without the window, so the window "
    "stays an option (model.sliding_window, layer_types) and is off by default. B = d1 + ask_from 0.75: "
    "1,208 s in all (train 1,076 s at load ~7); 512 0.8/1/1/1/0.9, 1K 0.8/0.9/1/1/0.9, 2K 0/0/0.6/0.9/0.9: "
    "far first askings moved 2K depth 50% from 0.1 to 0.6; depth 0 stayed at 0.8 at both 512 and 1K, "
    "i.e. it is the position right after the instruction, not the distance, that fails. "
    "C = B + retrieval.edge_depth 0.2 (a fifth of the needles at depth 0 or 100%), corpus built while the "
    "synthesis code was being changed: never found the copy (0.0 everywhere, loss 2.4 at step 640; 1,027 s). "
    "D = B on the final synthesis code = the defaults: 1,087 s in all (ingest 30, base eval 35, train 982, "
    "tuned eval 39; test suite running at nice 19 alongside); 1K 0.8/1/1/1/1, 2K 0/0.3/0/1/1; the copy "
    "appeared late (weighted loss 2.0 until step 450, 1.2 by 550). Finding the copy is the fragile step "
    "(STACK-FACTS: one of two seeds), and depth 0 at 1K is the one cell below 0.9.",
"Session 4 (edge needles; full loops, python benchmarks/e2e.py): E = D + retrieval.edge_depth 0.1 in "
    "examples of every length: the copy never formed (1K 0.1/0.1/0/0/0.7, 2K 0/0/0/0/0.6; 1,098 s). With C "
    "that is two of two runs where edge needles in the 256-token stage stalled the copy (a needle right "
    "before the question is a short copy the model can take instead). F = D + edge_depth 0.2 only in the "
    "1,024- and 2,048-token examples (retrieval.edge_from 1024) = the defaults since: 1,143 s in all "
    "(ingest 30, base eval 37, train 1,036, tuned eval 40; the AOT and attention-matrix jobs at nice 19 "
    "alongside); 1K 1/1/1/1/1, 2K 0/0/0.6/1/1. G = F with other seeds (--ingest-set retrieval.seed=1 "
    "--set train.seed=1 --set data.seed=1: another corpus draw, init and order), quiet machine: 1,062 s "
    "in all (ingest 28, base eval 36, train 960, tuned eval 39); 1K 1/1/1/1/1, 2K 0/0/0.4/1/1. Base 0 in "
    "every cell of both. Depth 0 at 1K (0.8 in D, single-digit slips) needed needles at that position "
    "in training: a uniform depth snapped to a sentence start almost never puts one right after the "
    "instruction.",
    "Session 5 (corpus draws; full loops, python benchmarks/e2e.py, defaults): the sample corpus holds the "
    "bookft source tree, so every code version is a new corpus draw (tokenizer, haystacks) and a different "
    "run (deterministic per version: K repeated J's corpus byte for byte). H = the defaults at 0c9ce70 "
    "(document block swaps on in the data path): no copy formed (loss 2.3 at step 700; 1K 0/0/0/0/0.1; 1,038 "
    "s). I = the swaps disabled, another draw (the code differed by that line): copy at ~step 450, 1K "
    "0.5/0.9/1/1/1, 2K 0/0.2/0.1/1/1 (1,317 s, test jobs alongside). J = e50dd3a, the final code of the "
    "session: 1K 0/0/0.3/0.6/0.9, 2K 0/0/0/0.1/0.8 (1,312 s; its steps ran 25-30% slower than K's with the "
    "same code and corpus: host variance). K = J's corpus with a longer 256 stage (256x450 -> 512x100 -> "
    "1024x100 -> 2048x125, 775 steps): 1K 0.2/0.7/1/1/1, 2K 0/0/0/1/1 (1,123 s): better, not enough, not "
    "adopted. The swaps are exact in the real step (tiny-cpu loss equal to 7 digits and grads within 3e-7 "
    "with and without them), so H-J are draws of one recipe: 2 of 5 draws (F, G) meet 90% at every 1K depth. "
    "The fragile step is finding the copy by ~step 450; a recipe that finds it in every draw is open.",
    "Session 5, L = 51133ee (the final code; a refactor of balance.py made it a new draw): 1K 0.6/0.7/1/1/1, "
    "2K 0/0.5/0/1/1 (957 s, CI tests at nice 19 alongside). 2 of 6 draws meet 90% at every 1K depth.",
    "Session 6 (issue 16; the sample is now fixed: a generated code repository replaces the live bookft tree, "
    "tests/ingest/test_ingest_sample.py pins it, so runs compare like with like). Diagnosis with the new needle "
    "probe (train.probe_every) and teacher-forced answer-digit accuracy on the corpus's own 256-token examples: "
    "the old defaults on the fixed corpus (draw 0) had probe 0 at 1K/2K through step 450, and at step 300 of the "
    "256 stage answer digits 1-7 were at chance (0.07-0.2) while the weighted loss had fallen from 6.9 to 1.1: "
    "the loss falls by learning the 5%-weighted context, the copy itself is a late phase change. A 256-token "
    "example holds one asking (the NIAH frame takes 167 of its tokens), so the first stage sees about 110 answer "
    "digits per step.",
    "Session 6 levers tried on that first stage (draw 0, 2-core host shared with two helper jobs at load 4-7): "
    "(w1) a synthetic induction warm-up, rows of random-token strings repeated at random distances (train "
    "curriculum stage `data: copy`, bookft/train/synthetic.py), 100 steps at 256: the copy loss stayed at "
    "ln(V)=6.93 for all 100 steps, no induction formed; (w2) the same over the 10 digit tokens: loss to ln(10) "
    "by step 40, 2.16 at step 80, still no copy; (w3) RoPE base 1e6 instead of 1e4: the same loss curve as 1e4 "
    "to step 200 (1.66/1.48 at 100/150 vs 1.63/1.46), digits at chance at 200; (w5) 512-token examples with up to "
    "8 askings (5.4 on average, near copies of the previous answer): no copy at step 150 even for the near "
    "askings; (w6) init_std 0.08 (1/sqrt(d) for d=128) instead of 0.02, whose small bilinear QK start is the "
    "classic induction plateau: loss 2.05 at step 50 (2.29), 1.20 at 250 (1.34), digits 0.1-0.4 at step 250 vs "
    "0.07-0.2 at 300: a little earlier. No lever made the copy form in under ~250 steps; what differs between "
    "draws is when it forms.",
    "Session 6 recipe (the defaults since): the stages are gated on the probe (bookft/train/gate.py): the 256 stage "
    "ends at the first probe whose 256-token cells are all right (cap 600 steps), the 1024 stage likewise at 1,024 "
    "(cap 400), 512 x 100 and 2048 x 300 fixed, so a slow draw gets the steps it needs and a fast one moves on "
    "(train.steps 1400 is the sum of the caps); RoPE base 5e5 (at 2,048 tokens only 4 of 32 head dims rotate "
    "less than a radian with base 1e4, 14 with 5e5: room for a content match across the whole context, cf. "
    "Xiong et al. 2023); init_std 0.08. Results per draw: the `draws` list of this file.",
    "Session 6 results (python benchmarks/e2e.py --draws 5, run as two processes, seeds 0 1 2 and 3 4, on the 2-core "
    "host beside two helper jobs and a nice-19 test suite, load 5-10; draws 2 and 4 were stopped unrun for the "
    "session's time): draw 0: 256 gate at step 500, 1K gate at 650, 950 steps; 1K 1/1/1/1/1, 2K 0.9/0.8/1/1/1; "
    "1,685 s. Draw 1: the 256 stage ran to its 600 cap (probe/256 at 0.33-0.67 from step 500, 1.0 only at 650 "
    "while 1K read 0.67: the 6-sample 256 probe is a noisy gate), 1K gate at 750, 1,050 steps; 1K 1/1/1/1/1, 2K "
    "0.6/0.5/1/1/1; 1,917 s. Draw 3: copy at step ~550, probe/256 1.0 at 600 (the cap), 1K gate at 750; 1K "
    "1/0.9/1/1/1, 2K 1/0.7/1/1/1; 2,150 s. Base 0 in every cell of every draw. So 3 of 3 draws meet 0.9 at "
    "every 1K depth (the old recipe: 2 of 6) and 0 of 3 at 2K (worst cells 0.8, 0.5, 0.7, all at depth 0-25%; "
    "the old recipe read 0 at 2K depth 0 on all six draws). 2,048-token steps took 2.5-3.3 s at this load, so "
    "the 300-step 2K stage is most of each loop; every wall is over the 20-minute target here.",
    "Session 6, draw 2 (python benchmarks/e2e.py --seeds 2, rerun alone after the first process was stopped in it; "
    "ingest and base eval beside three other jobs, training alone from step ~200): copy at step ~330, 256 gate at "
    "400, 1K gate at 650, 950 steps; 1K 1/1/1/1/1, 2K 0.7/0.8/1/1/1; 1,756 s (train 1,400 s; 2,048-token steps "
    "1.5-2.2 s alone). Four draws: 1K met on 4 of 4, 2K on 0 of 4; draw 4 not run.",
    "Next (not done): a larger 256 cap (the copy formed at step 300-550; draw 3 met the cap exactly) and a gate "
    "on a larger probe (the 256 cells are the noisiest); more 2,048-token steps for depth 0-25% within the time "
    "budget, which needs the 2,048 step to get cheaper (about 1 s on a quiet host in session 3) or fewer probe "
    "lengths; a quiet-machine wall for the whole loop; draws 2 and 4.",
    "Session 7 (issue 16), diagnosis of the 2,048-token misses of the session-6 recipe (draw 2's eval): all are "
    "single-digit slips inside the value, e.g. 4184119 -> 4188119 and 8809694 -> 8808694: the copy lands on a "
    "neighbouring needle position (it repeats the digit it is on, or the one before), not on the wrong place; "
    "the copying head's match is content (the short conv's 8-token windows) plus RoPE's rotation over 1,500-2,000 "
    "tokens, which blurs the aligned window against its neighbours.",
    "Session 7 levers, full loops (python benchmarks/e2e.py, the 2-core host beside a helper's test runs, load 3-7): "
    "(R1) draw 1 with retrieval.needles [1, 1, 4, 8] (four and eight facts with distinct keys per 1,024/2,048 "
    "example, each asked once at the end: four to eight far copies per example instead of one) and 512-token "
    "attention blocks: the 1,024 gate passed at step 900 instead of 750 and probe/2048 read 0.67 at step 1,050 "
    "(session 6: 0.83); stopped at step 1,082 (24 min, past the budget). The option stays (retrieval.needles, "
    "tested), off by default. (R2) draw 1 with model.nope_layers [0] (layer 0, the copying layer, without RoPE: "
    "a content-only match) and 512-token blocks: copy at step ~350, 256 gate at 400 (session 6: the 600 cap), "
    "1,024 gate at 650, 950 steps, 1,105 s in all at load 4.5-5.2; 1K 1/0.9/1/1/1, 2K 0.8/1/1/1/1 (session 6: "
    "0.6/0.5/1/1/1); misses 4870790 -> 4870799, 9529439 -> 9529489. (R3) draw 0, same recipe as R2: copy at "
    "~450, 256 gate at 500, but the 1,024 probe stayed at 0.5-0.83 and the stage ran to its 400 cap (loss spikes "
    "to 1.9 at step 400 and 1.3 at 1,100), 1,300 steps, 1,193 s; 1K 0.5/0.6/0.9/0.9/0.9, 2K 0.4/0.3/0.6/1/0.9 "
    "(session 6: 1/1/1/1/1 and 0.9/0.8/1/1/1). So NoPE in layer 0 is not a robust fix: better on one draw, "
    "much worse on the other; the default went back to the session-6 recipe (RoPE in both layers, 128-token "
    "blocks) and model.nope_layers stays an option (tested: decode cache, HF folder key, export refuses).",
    "Session 7, draw 4 of the session-6 recipe (python benchmarks/e2e.py --seeds 4, on the code after the issue-19 "
    "redesign, which keeps the default run's losses; beside the full test suite at nice 19 and a helper, load "
    "2.7-5.4): copy at ~350-400, 256 gate at 550, 1,024 gate at 1,000, 1,300 steps; 1,762 s (train 1,691 s); "
    "1K 1/1/1/1/1, 2K 0.3/1/1/1/1. The seven 2K depth-0 misses are all the second digit, six of them read as 5 "
    "(4833188 -> 4533188, 8809694 -> 8509694, ...): at the far end right after the instruction the copy of the "
    "second digit fails and a prior takes over. Five draws of this recipe: 1K met on 5 of 5, 2K on 0 of 5 (worst "
    "cells 0.8, 0.5, 0.7, 0.7, 0.3, every one at depth 0-25%).",
    "Session 7, (R5) draw 0 with model.nope_layers [0], 512-token blocks and lr 1.5e-3 instead of 2e-3 (R3's loss "
    "spikes): the 256 stage ran to its 600 cap (probe/256 0.33-0.83 from step 500), 1,024 gate at 800, probe/2048 "
    "1.0 from step 950, 1,100 steps; 865 s in all (ingest 13, base eval 28, train 795, tuned eval 27) at load "
    "1.7-4.9 beside the test suite; 1K 1/1/1/1/1, 2K 0.9/1/1/1/1 (one miss, 3708443 -> 3708483): the first "
    "loop to meet the target on both counts (grid and 20 minutes). (R6, R7) draws 1 and 4 of the same recipe, run "
    "side by side (load 3-7): draw 1 1K 1/0.8/1/1/1, 2K 0.7/0.3/0.9/1/1, 1,050 steps, 1,364 s; draw 4 1K 1/1/1/1/1, "
    "2K 0.9/0.9/0.8/0.9/0.9, 950 steps, 1,294 s. So 1 of 3 draws: not robust either, not adopted.",
    "Next (not done): the 2,048-token slips need a sharper copy at long range on every draw; candidates not yet "
    "measured: partial RoPE (a share "
    "of each head's dims unrotated), a longer or gated 2,048 stage paid for by cheaper steps (512-token blocks "
    "cut a 2,048 step from 1.77 s to 1.41 s: the jitted train step on 4 simulated devices, 5 steps after "
    "compile, load ~2).",
    "Session 8 (issue 16), two levers aimed at the far-end slips, tried on draw 4 (the worst draw of the "
    "session-6 recipe, 2K 0.3/1/1/1/1), run side by side beside two helpers' test runs (load 5-13): (P1) "
    "retrieval.needles [1, 1, 1, 4] (the 2,048-token examples hold four facts with distinct keys, each asked "
    "once at the end: four far copies per example instead of one far and three near ones; the 256-1,024 "
    "examples unchanged, so the gates are not delayed as in R1) with 512-token blocks: 256 gate at 450, 1,024 "
    "gate at 750, 1,050 steps; 1K 1/1/1/1/1, 2K 1/1/1/1/0.4: depth 0 fixed, but depth 100% broke (six misses, "
    "all the first digit read as 9: with four askings at the end, no training fact sits right before its "
    "question any more). (P2) P1 + RoPE base 1e9 instead of 5e5 (with head_dim 32, 20 of the 32 dims turn less "
    "than a radian over 2,048 tokens instead of 14, so the copy's content match is nearly unrotated at the far "
    "end, while the fast dims keep order): 256 gate at 400, 1,024 gate at 700, probe/2048 1.0 from step 900, "
    "1,000 steps; 1K 1/1/1/1/1, 2K 1/1/1/1/1 (worst cell 1.0), 3,148 s at load 1-13 (train 3,024 s). P2 is the "
    "default since session 8 (configs/tiny-cpu.yaml rope theta 1e9 and 512-token blocks, corpora/sample.yaml "
    "needles [1, 1, 1, 4]); its draws are the `draws` of this file, the session-6 recipe's five draws are "
    "under `previous_recipe`.",
    "Session 8, draws 0 and 1 of P2 (the new default; --seeds 0 and --seeds 1 as two processes, beside two "
    "helpers' test runs and two more draws that were stopped for time, load 4-19): draw 0: 256 gate at ~450, 1,024 "
    "gate at 750, probe/2048 1.0 at 1,050, 1,050 steps; 1K 1/1/1/1/1, 2K 1/1/1/1/1; 3,362 s (train 3,066 s). "
    "Draw 1: 256 gate at 450, then the 1,024 probe swung 0.33-0.83 for 400 steps with loss spikes (1.7 at step "
    "516, 1.8 at 841, 2.7 at 1,116; grad norm up to 4.6 before clipping) and the stage ran to its cap, 1,250 "
    "steps; 1K 1/1/1/0.9/0.5, 2K 0.4/0.9/0.7/0.9/0.2, single-digit slips in the middle of the value (3708443 -> "
    "3703443, 6421890 -> 6424890); 3,558 s. So P2 meets the target on 2 of 3 draws (0 and 4, each with every "
    "cell at 1.0), the session-6 recipe on 0 of 5: P2 is the default, and the target is not met. Draw 1 fails "
    "the way R3 did (NoPE in layer 0 at lr 2e-3): an unstable 1,024 stage, which R5's lr 1.5e-3 steadied on "
    "draw 0. Walls here were 3-4x a quiet host's (R5: 865 s at load 2-5 for 1,100 steps).",
    "Session 8, (P3) draw 1 of P2 with lr 1.5e-3 instead of 2e-3 (run beside the CI suite, load 0.5-5.5): 256 "
    "gate at 450, the 1,024 gate passed at 700 (P2 at 2e-3: its cap), 1,000 steps, 1,276 s (train 1,197 s); 1K "
    "1/1/1/1/0.9, 2K 0.4/1/1/1/0.8 (P2: 0.4/0.9/0.7/0.9/0.2). The six depth-0 misses at 2K are a digit read as 0 "
    "(3708443 -> 3700443, 4833188 -> 4830188): steadier, still a miss at the far end. Not adopted (draws 0 and "
    "4 at 1.5e-3 not run).",
    "Session 9 (issue 16), (Q1) P2 with lr 1.5e-3 and a 500-step 2,048 stage instead of 300 (train.steps 1600), "
    "draws 1 and 2 as two processes beside the real-model benchmarks and two helpers (load 5-20; walls not "
    "comparable). Draw 1 (P2's failure): identical to P3 through step 1,000 (256 gate at 450, 1,024 gate at "
    "700), then the 2,048 probe swung 0.33-1.0 and the extra 200 steps at 2,048 closed the far end: 1K "
    "1/1/1/1/1, 2K 1/1/1/1/1 (P3, 300 steps at 2,048: 2K depth 0 at 0.4), 1,200 steps. Draw 2: 256 gate at "
    "550, then the 1,024 stage never converged (probe/1024 0.0-0.67 for 400 steps, grad norm up to 8 before "
    "clipping, loss flat at ~0.75) and ran to its cap; the 2,048 stage brought probe/1024 to 1.0 at 1,450 "
    "but the grid read 1K 0.9/0.8/0.7/0.6/0.3, 2K 0.6/0.5/0.5/0.5/0.3 after 1,550 steps (the run was "
    "stopped by mistake at step 1,077 and resumed from its step-1,000 checkpoint; the resume is bitwise). "
    "So draw 2 is the hard draw of the base-1e9 recipes: the session-6 recipe (base 5e5) passed its 1,024 "
    "gate at 650 on the same draw. Q1 is not adopted: 1 of 2 draws.",
    "Session 9, (Q2) Q1 + model.logn_attention 256 (each query's logits scaled by max(1, log(p+1)/log(256)), "
    "p its position in the document: the softmax sharpens with the number of keys; Chiang & Cholak 2022, "
    "Qwen's logn_attn) on draw 2: the 256 gate passed at 450 (Q1: 550; corpus rows at 256 carry long "
    "documents' positions, so the scale acts in the first stage too), then probe/1024 stayed at 0.33-0.5 "
    "through step 850, no better than Q1; stopped at step 873 for session time, no eval. The knob is kept "
    "(tested in every strategy, off by default).",
    "Session 9, scheduling on this host: the kernel groups processes by session (autogroup, "
    "/proc/sys/kernel/sched_autogroup_enabled = 1), so `nice` only orders processes within one session; "
    "a helper's niced job in its own session took an equal share from the loops until each session's "
    "/proc/PID/autogroup nice was set. The session-8 walls (3-4x a quiet host) were partly that.",
    "Session 10 (issue 16), (Q3) Q1 with lr_scale 0.45 at 1,024 (Q1: 0.7; the 2,048 stage stayed at 0.6, so "
    "the rate rose again at the switch): draw 2's 1,024 gate passed at step 900 (Q1: never in 400 steps), "
    "then the 2,048 stage pulled probe/1024 back to 0.33-0.67; 1K 1/1/1/0.8/0.4, 2K 0.6/0.9/0.7/1/0.2, 1,400 "
    "steps, 4,048 s. Draw 3 (its first base-1e9 run): 1,024 stage to its cap, 1K 1/1/1/1/1, 2K "
    "0.6/1/0.9/0.8/0.7, 1,500 steps, 4,303 s. Two loops side by side beside the session's ingest work (load "
    "0.3-11). Not adopted.",
    "Session 10 diagnosis, benchmarks/copy_attention.py (new: the dense reference attention on one device, "
    "recording every head's probabilities at the positions that predict the answer tokens; the source of "
    "answer token j is the needle token it repeats): on Q3 draw 2's checkpoints at steps 800 and 900 (its "
    "1,024 stage; 1,024 tokens, 4 seeds, depths 0-100%) the copying head was L1H1 (layer 1); its wrong tokens"
    " had their argmax on the right source token (12 of 14 at step 800, p 0.70 on it; 3 of 5 at step 900, the"
    " prediction being the needle's next token in 3 of 5): right look, wrong read. With depthwise taps, x'_t "
    "= x_t + sum_k w_k * x_{t-k}, 'digit d one token back' lands in the embedding space of 'digit d here', "
    "scaled per channel, so neither the key match nor the value's read can tell neighbouring positions apart "
    "cleanly.",
    "Session 10, (Q4) model.short_conv_mix dense (a full 128 x 128 matrix per tap, 131k parameters, "
    "zero-init: each offset can get a subspace of its own, as a previous-token head writes through its OV; "
    "Olsson et al. 2022), lr 1.5e-3, lr_scale 0.8 / 0.45 / 0.4, 500 steps at 2,048, train.steps 1600. Draw 2 "
    "(the hard draw): the 256 gate passed at step 150 (Q3: 550), 512 stage from step 151, 1,024 from 251, "
    "2,048 from 301; 1K 1/1/1/1/1, 2K 1/1/1/1/1; 800 steps, 3,277 s. The copy_attention grid of its final "
    "checkpoint (1,024 and 2,048 tokens, depths 0/50/100, 3 seeds): copying head L0H1 (layer 0: one layer "
    "suffices once earlier tokens have their own subspace), p 0.61 on the source token, 144 of 144 answer "
    "tokens right. Draw 1 (P2's failure): 512 stage from step 151, 1,024 from 251, 2,048 from 551; 1K "
    "1/1/1/1/1, 2K 1/1/1/1/1; 1,050 steps, 3,641 s. Draw 3: 512 stage from step 201, 1,024 from 301, 2,048 "
    "from 451; 1K 1/1/1/1/1, 2K 1/1/1/1/1; 950 steps, 3,388 s. Three loops side by side (with a test run for "
    "part of the time, load 8-11, walls ~3x a quiet host's). Base 0 in every cell. 3 of 3 draws meet the "
    "target; Q4 is the default since session 10 (its draws are the `draws` of this file); draws 0 and 4 not "
    "run (session time).",
    "Session 11, the 20-minute bar. Q4's draw 0, run alone on a quiet host: 1K 1/1/1/1/1, 2K 1/1/1/1/1, "
    "but 1,222 s: its 1,024 stage ran to the 400-step cap with the 1,024 probe at 5/6 from step 300 to "
    "650, and the 2,048 stage fixed it within 50 steps (probe 1.0 at every length from step 750). (Q5) Q4 "
    "with the 1,024 cap at 200 and train.steps 1400, the default since session 11; every draw run alone "
    "(one loop at a time; load 1.4-3.4, the loop's own threads and, during draws 0 and 4, test runs of "
    "mine). Draw 0: stages from 1/151/251/451, 950 steps; 1K 1/1/1/1/1, 2K 0.9/1/1/1/1 (one cell at the "
    "bar: Q4's 200 more steps at 1,024 gave 1.0); 1,147 s. Draw 1: 1,024 stage to its cap too (probe 5/6), "
    "950 steps; 1/1/1/1/1 and 1/1/1/1/1; 1,053 s. Draw 4: 1,024 gate passed at step 300, 800 steps; "
    "1/1/1/1/1 and 1/1/1/1/1; 1,057 s. Draw 2: gate at 300, 800 steps, all 1.0, 921 s; its 800 losses "
    "equal Q4 draw 2's bit for bit (a gate passed before the new cap leaves the run unchanged, on another "
    "day and load). Draw 3: 256 gate at step 200, 1,024 gate at 450, 950 steps, all 1.0, 1,110 s; its 950 losses "
    "equal Q4 draw 3's bit for bit. 5 of 5 draws meet the target, every wall under 1,200 s. Base 0 in "
    "every cell.",
    "Why 2048 examples: session-2 run 2 (stages up to 1024) reached 1K 0/0/0.9/1/1; adding a 2048 "
    "stage (d1) took depth 0 at 1K from 0.0 to 0.8 (STACK-FACTS: training at 2,048 fixes depth 0 at "
    "1,024). The probe overstates reach: earlier askings of the question give most answer targets a "
    "nearby copy, so it reads 0.97-1.0 at 2048 while the eval's far needles fail.",
    "Data fixes that made it learn (session 2): (1) a curriculum row cut from a longer example asked "
    "about a fact it did not hold: rows now drop the loss of an example they cut (train/data.py "
    "drop_cut_example) and a stage draws only sequences whose examples its rows hold whole "
    "(Batches.eligible); (2) examples are topped up to exactly their length so each starts on its row.",
    "Ablation (session 2, standalone loop at 256, answer-token accuracy at steps 100/200/250/300/400): "
    "short conv seed 0: 0.22 (150) -> 0.86 (250) -> 0.99 (300); seed 1: 0.20/0.58/0.99/1.00; plain "
    "Llama (no conv): 0.23/0.32/0.37/0.40/0.85; plain + QK-norm: 0.35/0.39/0.39/0.41/0.50. The plain "
    "model learns the copy ~150 steps (1.7x) later, which the 20-minute budget cannot afford.",
    "Session-2 full loops (no window, stages up to 1024): run 1 1K 0/0.2/0.3/0.9/1; run 2 1K 0/0/0.9/1/1, "
    "2K 0/0/0/0.3/1 (base 0 everywhere).",
    "Step cost (session 3 profile, 1 device, 4,096 tokens at 1024): 1.1-1.3 s, of which attention fwd+bwd "
    "is ~0.35 s per layer (the [B,H,q,k] score traffic: this host streams ~4 GB/s, so an elementwise pass "
    "over 16M floats costs ~35 ms) and the rest matmuls at ~30 GFLOP/s (peak ~55). Ring over 4 "
    "simulated devices costs about the same wall time as 1 device (it uses both cores).",
]


def machine() -> dict:
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "load_avg_at_end": load}


def collect(out: str, run_dir: str, note: str) -> dict:
    """Figures of an interrupted loop from what it left on disk (corpus manifest, evals, metrics)."""
    import statistics

    from bookft.corpus import open_corpus
    from bookft.quickstart import _per_depth

    man = open_corpus("data/sample").manifest
    res: dict = {"status": f"incomplete: {note}",
                 "corpus": {"path": str(open_corpus("data/sample").path), "sequences": man["counts"]["sequences"],
                            "last_pass_timings_s": man["timings"]}}
    for name in ("base", "tuned"):
        p = Path(out) / f"eval-{name}" / "results.json"
        if p.is_file():
            r = json.loads(p.read_text())
            res[name] = {"per_depth": _per_depth(r), "summary": r["summary"], "timing": r["timing"]}
    m = Path(run_dir) / "metrics.jsonl"
    if m.is_file():
        rows = [json.loads(x) for x in m.read_text().splitlines() if x.strip()]
        per_len: dict = {}
        for r in rows[1:]:
            per_len.setdefault(str(r["seq_len"]), []).append(r["step_time_s"])
        res["train"] = {"steps_done": len(rows), "last_loss": rows[-1]["loss"] if rows else None,
                        "median_step_s": {k: round(statistics.median(v), 2) for k, v in per_len.items()},
                        "tokens_per_step": 2 * 2048}
    return res


def _grid_row(per_depth: dict[str, dict[str, float]]) -> dict[str, list[float]]:
    return {n: [v for _, v in sorted(d.items(), key=lambda kv: float(kv[0]))] for n, d in per_depth.items()}


def run_draw(seed: int | None, args, console) -> dict:
    """One default loop (bookft quickstart); `seed` sets retrieval.seed, train.seed and data.seed
    together (a corpus draw, an initialisation and a data order), each draw in its own folders."""
    from bookft.quickstart import run_quickstart

    ingest_set, run_set = list(args.ingest_set), list(args.set)
    out, run_dir = args.out, None
    if seed is not None:
        ingest_set += [f"retrieval.seed={seed}", f"out=data/sample-draw{seed}"]
        run_set += [f"train.seed={seed}", f"data.seed={seed}"]
        out, run_dir = f"{args.out}/draw{seed}", f"runs/tiny-cpu-draw{seed}"
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    got = run_quickstart(out=out, run_dir=run_dir, overrides=run_set, ingest_overrides=ingest_set, console=console)
    wall = time.perf_counter() - t0
    tuned = got["tuned"]["per_depth"]
    worst = min(v for d in tuned.values() for v in d.values())
    command = " ".join([f"--ingest-set {x}" for x in ingest_set] + [f"--set {x}" for x in run_set])
    return {"seed": seed, "command": command,
            "wall_s": round(wall, 1), "load_avg_start": load0, "load_avg_end": os.getloadavg(),
            "worst_cell": worst, "tuned_grid": _grid_row(tuned), "base_grid": _grid_row(got["base"]["per_depth"]),
            "meets_target": bool(worst >= TARGET), **got}


TARGET = 0.9  # issue 16: at least 0.9 at every depth at 1,024 and 2,048 tokens, on every draw


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=0,
                    help="run the default loop under N draws (seeds 0..N-1 for retrieval.seed, train.seed, data.seed)")
    ap.add_argument("--seeds", type=int, nargs="*", help="the draws' seeds instead of 0..N-1")
    ap.add_argument("--set", action="append", default=[], help="run config override a.b=value")
    ap.add_argument("--ingest-set", action="append", default=[], help="corpus config override a.b=value")
    ap.add_argument("--out", default="quickstart-out")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "e2e.json"))
    ap.add_argument("--collect", metavar="NOTE", help="write the figures an interrupted run left (no run)")
    args = ap.parse_args()
    os.chdir(ROOT)
    if args.collect:
        result = {"benchmark": "e2e", "machine": machine(), "command": "python benchmarks/e2e.py (interrupted)",
                  **collect(args.out, "runs/tiny-cpu", args.collect), "notes": NOTES}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps({k: result[k] for k in ("status", "train") if k in result}, indent=1))
        return
    console = Console()
    seeds = args.seeds if args.seeds else (list(range(args.draws)) if args.draws else [None])
    from bookft.train.config import load_run_config

    cfg = load_run_config(None, args.set)
    result = {
        "benchmark": "e2e", "machine": machine(),
        "command": "python benchmarks/e2e.py " + " ".join(
            ([f"--draws {args.draws}"] if args.draws else [])
            + ([f"--seeds {' '.join(map(str, args.seeds))}"] if args.seeds else [])
            + [f"--ingest-set {s}" for s in args.ingest_set] + [f"--set {s}" for s in args.set]),
        "config": {"curriculum": [vars(s) for s in cfg.train.curriculum], "batch_size": cfg.data.batch_size,
                   "model": {**{k: getattr(cfg.model, k) for k in ("num_layers", "hidden_size", "num_heads",
                                                                  "qk_norm", "short_conv", "short_conv_mix",
                                                                  "vocab_size", "nope_layers")},
                             "rope_theta": cfg.model.rope_theta},
                   "attention": vars(cfg.attention), "mesh": cfg.parallel.mesh},
        "target": f"every cell >= {TARGET} at every length, on every draw", "draws": [], "notes": NOTES,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        result["draws"].append(run_draw(seed, args, console))
        result["draws_meeting_target"] = sum(d["meets_target"] for d in result["draws"])
        path.write_text(json.dumps(result, indent=1, default=str))  # after every draw: nothing lost
    t = Table(title=f"bookft e2e default loop: {result['draws_meeting_target']} of {len(seeds)} draws meet "
                    f">= {TARGET} in every cell")
    for c in ("draw", "length", "depth 0 / 25 / 50 / 75 / 100%", "worst cell", "wall s", "load (start-end)"):
        t.add_column(c)
    for d in result["draws"]:
        for i, (n, row) in enumerate(sorted(d["tuned_grid"].items(), key=lambda kv: int(kv[0]))):
            t.add_row(str(d["seed"]) if not i else "", n, " / ".join(f"{v:.1f}" for v in row),
                      f"{d['worst_cell']:.1f}" if not i else "", f"{d['wall_s']:.0f}" if not i else "",
                      f"{d['load_avg_start'][0]:.1f}-{d['load_avg_end'][0]:.1f}" if not i else "")
    console.print(t)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
