"""Training vs inference: teacher forcing and step-by-step decoding of one sentence, side by side.

Thin: the shared sentence and reference (state) -> models.side_by_side (explorer.decoding.side_by_side,
cached) -> explorer.plots.forcing figures and one table with both runs by position.
"""
import pandas as pd
import streamlit as st

from explorer.model.rounding import model_atol
from explorer.plots.forcing import causal_mask_figure, rows_figure
from webapp import downloads, models, numbering, presenter, sentence, state, url_keys

PREFIX_SHOWN = 8               # pieces of the step-by-step input shown per step (the rest as …)


def _so_far(pieces: list[str], i: int) -> str:
    shown = pieces[max(0, i + 1 - PREFIX_SHOWN):i + 1]
    return ("… " if i + 1 > PREFIX_SHOWN else "") + " ".join(shown)


st.title("Training vs inference")
# The page's parts in the order of the mode (webapp.presenter.areas): on a projector the two runs come first
# (what they share, then each run's figure), then the Learn panel and the sentence with its forcing choice.
area = presenter.areas(lecture=("runs", "learn", "inputs"), study=("learn", "inputs", "runs"))
with area["learn"]:
    state.learn(
        "**Training (teacher forcing):** the decoder is given the reference shifted one place right (the start "
        "token, then the reference without its last token) and scores **every position in one pass**; the causal "
        "mask keeps position *i* from seeing the tokens after it, so it predicts token *i* from the true tokens "
        "before it. **Inference:** there is no reference, so the decoder writes **one token per step** and reads "
        "back what it wrote itself. With the same inputs the numbers are the same; they part ways where the "
        "model's own token differs from the reference, because from then on it reads tokens training never fed it.",
        state.equations(r"\text{training: } \mathcal{L} = -\sum_{t=1}^{|y|} \log P(y_t \mid y_{<t}, x)"
                        r"\ \text{(all } t \text{ at once)}",
            r"\text{inference: } \hat y_t = \arg\max_{w} P(w \mid \hat y_{<t}, x)\ \text{(one } t \text{ per step)}"))

FORCED = {"reference": "the reference translation", "own": "the model's own greedy output"}
with area["inputs"]:
    ckpt = models.require_checkpoint()
    path = str(ckpt.path)
    box = dict(widget=st.text_input) if presenter.on() else dict(height=68)       # one line on a projector
    text = sentence.sentence_box("tvi_text_box", "Sentence (shared with the Translate page)",
                                 placeholder="Type a sentence, or pick a test example on the Translate page.", **box)
    clipped = sentence.require_text(text, "Type a sentence above (or pick an example on the Translate page) to "
                                          "compare training and inference on it.", "used")
    reference = sentence.current_reference(path, text)
    options = list(FORCED) if reference else ["own"]
    forced_now = st.session_state.get("tvi_forced")
    url_keys.hold("tvi_forced", forced_now if forced_now in options else options[0])
    forced_kind = st.radio("Teacher forcing is given", options, format_func=FORCED.get, key="tvi_forced",
                           horizontal=True,
                           help="A test sentence (or one with a reference typed on the Translate page) can force its "
                                "reference; free text has none, so the model's own output is forced.")
    if not reference:
        st.caption("This sentence has no reference (pick a test example on the Translate page, or type one there), "
                   "so the model's own greedy output is forced.")
    result = state.friendly(models.side_by_side, ckpt, clipped, reference if forced_kind == "reference" else None,
                            state.decode_settings(), what="Decoding")
    if result is None:
        st.stop()
    sentence.notices(ckpt.tokenizer, result, clipped)
with area["runs"]:                 # the page's result
    if result.forced is None:
        st.info(f"Nothing to decode: {result.reason or 'the text produced no tokens'}.")
        st.stop()
    forced, steps = result.forced, result.steps

    # ---- the point of the page, in one line ------------------------------------------------------------
    if result.own_output:
        diff = result.max_difference
        runs = (f"teacher forcing (one pass over {len(forced.outputs)} positions) and step-by-step decoding "
                f"({len(steps.outputs)} steps)")
        rounding = model_atol(ckpt.model, forced.logprobs)        # float32 rounding's bound, on any processor
        if diff <= rounding:
            st.success(f"Same inputs, same numbers: {runs} give the same log-probabilities, largest difference "
                       f"{diff:.1e} (float rounding; the two sum in different orders).")
        else:
            st.warning(f"Same inputs, but {runs} differ by up to {diff:.1e} in log-probability: more than float "
                       f"rounding (at most {rounding:.0e} for this model) explains. The two decoder paths disagree; "
                       "please report it.")
    else:
        wrong = sum(not a for a in forced.agree)
        where = result.first_divergence
        st.info(f"The model's own pick differs from the reference at {wrong} of {len(forced.outputs)} positions. "
                + (f"Its greedy output first leaves the reference at position {where + 1}: from there on, inference reads "
                   "tokens that teacher forcing never gave it." if where is not None else
                   "Its greedy output is the reference itself."))
    if not result.finished:
        st.caption("Greedy decoding was cut at the length limit before the model ended the sentence.")

    # ---- the two runs ---------------------------------------------------------------------------------
    what = "the reference" if not result.own_output else "the model's own output"
    st.subheader(f"Training: teacher forcing of {what}, all positions at once")
    downloads.chart(rows_figure(forced.input_pieces, forced.output_pieces, forced.logprobs, forced.top_pieces,
                                forced.agree, title="Input = start + target shifted right; green pick = agrees"),
                    downloads.file_stem(ckpt.name, "teacher_forcing"), key="tvi_forced_rows")
    st.subheader("Inference: greedy, one token per step, reading its own tokens")
    downloads.chart(rows_figure(steps.input_pieces, steps.output_pieces, steps.logprobs,
                                title="Input at step i = start + what the model wrote at steps before i"),
                    downloads.file_stem(ckpt.name, "step_by_step"), key="tvi_steps_rows")

    # the mask full width (beside the table it had a third of the width, and its column labels piled up), then
    # the table
    downloads.chart(causal_mask_figure(forced.input_pieces, "Causal mask of the one teacher-forced pass",
                                       numbering.decoder_row_labels(forced.input_pieces, forced.output_pieces)),
                    downloads.file_stem(ckpt.name, "causal_mask"), key="tvi_mask")
    st.caption("Row i may attend to columns up to i only. Step by step, step i computes just row i: its new "
               "query against the keys cached from earlier steps.")

    n = max(len(forced.outputs), len(steps.outputs))
    cell = lambda values, i: values[i] if i < len(values) else None          # noqa: E731
    table = pd.DataFrame({
        "position": range(1, n + 1),                                          # from 1, like every page (numbering)
        "forced: reads": [cell(forced.input_pieces, i) for i in range(n)],
        "forced: token": [cell(forced.output_pieces, i) for i in range(n)],
        "forced: log p": [cell(forced.logprobs, i) for i in range(n)],
        "model's pick": [cell(forced.top_pieces, i) for i in range(n)],
        "agrees": [cell(forced.agree, i) for i in range(n)],
        "step: reads (so far)": [_so_far(steps.input_pieces, i) if i < len(steps.outputs) else None for i in range(n)],
        "step: writes": [cell(steps.output_pieces, i) for i in range(n)],
        "step: log p": [cell(steps.logprobs, i) for i in range(n)],
    })
    st.markdown("**Both runs by position**")
    widths = {"position": 60, "forced: reads": 95, "forced: token": 95, "forced: log p": 90, "model's pick": 95,
              "agrees": 55, "step: reads (so far)": 250, "step: writes": 90, "step: log p": 90}    # presenter mode
    st.dataframe(table, hide_index=True, width="stretch", key="tvi_table",
                 **presenter.table_columns(widths, {c: st.column_config.NumberColumn(format="%.5f")
                                                    for c in ("forced: log p", "step: log p")}))
    downloads.table_csv_button(table, downloads.file_stem(ckpt.name, "training_vs_inference"), key="tvi_csv")
