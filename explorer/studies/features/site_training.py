"""One site's dictionary and its random baseline (train_site): rows of the site collected from the training
pairs and held-out rows from the development pairs (sites.collect), the dictionary trained on the first
(transcoder.train) in the form the settings choose, the baseline in the same form, both scored on the
second (metrics) beside a least-squares linear map; the command's every site (job.run_train) and the app's
one (job.run_site) go through here.

The form, for an FFN site with FeatureSettings.skip "auto": the plain TopK transcoder is trained first and
refused, for the skip transcoder, when one of its latents fires on more than DENSE_SHARE of the held-out
rows at probe_step or at its end.
"""
from __future__ import annotations

import time

from explorer.files.names import FEATURES_KINDS
from explorer.studies.features import metrics, sites
from explorer.studies.features import transcoder as tcm

# "auto" (job.SKIP_MODES): the plain TopK transcoder (the form Dunefsky et al. 2024 name), unless one of its
# latents fires on more than DENSE_SHARE of the held-out rows; then the skip transcoder is trained instead
# (Paulo et al. 2025), and the random baseline takes the form the dictionary took. Why: on bible-es-en (docs/FEATURES.md, "Which transcoder, per site") a plain transcoder's
# busiest latent fired on 61-93% of tokens at the three encoder FFNs, carrying the FFN's linear part, and on
# 16-26% at the decoder's; with the skip no latent passes 33% anywhere, but at the decoder's first FFN, which
# a linear map explains to 0.891, the skip its baseline shares leaves the latents only 1 - 0.923 of the
# variance to beat random on (+0.057), where the plain one beats its baseline by +0.559. A dense latent is
# what makes a dictionary unreadable, so it decides; a site's form is in its row ("skip").
# The plain form is looked at a third of the way through its steps as well as at its end, so that a site whose
# plain transcoder is plainly dense does not pay for all of it: on bible-es-en's first encoder FFN its busiest
# latent grew 0.46, 0.50, 0.53, 0.58, 0.61 at steps 500, 750, 1,000, 2,000, 3,000, and at the decoder's first it
# peaked at 0.30 (step 750) and ended at 0.26 (python -m benchmarks features --busiest-at ...); with the
# whole plain training first, the second encoder FFN's site took 621 s, the machine idle, over the 10 minutes
# a layer is allowed (docs/FEATURES.md, "Which transcoder, per site").
DENSE_SHARE = 0.5


def probe_step(steps: int) -> int:
    """The step at which auto first looks at the plain transcoder's busiest latent (then again at its end)."""
    return max(1, steps // 3)


def train_site(model, tokenizer, train_pairs, held_pairs, site: str, settings,
               on_step=None) -> tuple[dict, dict[str, tcm.TopKTranscoder], dict[str, float]]:
    """One site's dictionary and baseline, at `settings` (a job.FeatureSettings; not imported, since job
    imports this module): (its JSON-ready row of held-out figures, {kind: transcoder},
    the seconds spent collecting and training), the forms tried as settings.forms(site) lists them.
    on_step(n) counts the steps of every training the site may need (settings.trainings(site) of them; the
    baseline's are the last, so a form kept at once jumps ahead; a cancel may raise)."""
    t0 = time.perf_counter()
    rows = sites.collect(model, tokenizer, train_pairs, site, settings.rows, settings.seed)
    held = sites.collect(model, tokenizer, held_pairs, site, settings.held_rows, settings.seed + 1)
    t1 = time.perf_counter()
    forms = settings.forms(site)
    probe, seen = probe_step(settings.steps), {}

    def dense_early(step: int, encode) -> bool:                  # auto's look at the plain form, part way
        if len(forms) < 2 or step != probe:
            return False
        seen.update(max_density_without_skip=metrics.busiest_share(encode, held.inputs), without_skip_steps=step)
        return seen["max_density_without_skip"] > DENSE_SHARE

    def fit(n: int, skip: bool, random_decoder: bool, give_up=None):
        step_done = None if on_step is None else (lambda step, _loss: on_step(n * settings.steps + step))
        made = tcm.train(rows.inputs, rows.outputs, settings.train_settings(site, model.cfg.d_model, random_decoder,
                                                                            skip), on_step=step_done, give_up=give_up)
        return made, None if made is None else metrics.quality(made, held.inputs, held.outputs)

    skip, dense = forms[0], {}
    trained, got = fit(0, skip, False, dense_early)
    if trained is None or (len(forms) > 1 and got.max_density > DENSE_SHARE):   # the plain form turned dense:
        dense = seen if trained is None else {"max_density_without_skip": got.max_density,   # the skip instead
                                              "without_skip_steps": settings.steps}
        skip = forms[1]
        trained, got = fit(1, skip, False)
    baseline, base = fit(len(forms), skip, True)
    made = dict(zip(FEATURES_KINDS, (trained, baseline)))
    stream = sites.is_stream(site)
    linear = {} if stream else {      # an SAE's identity map would explain everything
        "fve_linear": metrics.linear_fve(rows.inputs, rows.outputs, held.inputs, held.outputs)}
    row = {"site": site, "fve": got.fve, "fve_random": base.fve, **linear,
           "dead_fraction": got.dead_fraction, "dead_fraction_random": base.dead_fraction, "l0": got.l0,
           "max_density": got.max_density, "max_density_random": base.max_density, "width": trained.width,
           "k": trained.k, **({} if stream else {"skip": skip}), **dense, "rows": len(rows.inputs),
           "held_rows": len(held.inputs)}
    row = {k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()}
    return row, made, {"collect": t1 - t0, "train": time.perf_counter() - t1}
