"""Every knob of the benchmark, as two dataclasses (parsed by ``HfArgumentParser``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..core.settings import sampling_kwargs as sampling_kwargs  # re-exported: the bench's methods read it here
from ..generation.static_path import buckets_from_text

DEFAULT_QUESTIONS = Path(__file__).parent / "data" / "question.jsonl"
DEFAULT_METHODS = "stock,hf-prompt-lookup,hf-early-exit,hf-assistant,tree"
#: ``<method>+lookup``'s branch length without ``--lookup_tokens`` or a profile that recommends one
DEFAULT_LOOKUP_TOKENS = 4


@dataclass
class BenchArguments:
    """What is run and where the results go.

    Args:
        questions: Spec-Bench / MT-bench JSONL question file.
        methods: comma-separated method names; ``stock`` is always run (it is the reference).
        limit: run only the first N questions (after the category filter).
        per_category: keep only the first N questions of each category (Spec-Bench: 10 of each).
        categories: comma-separated categories to keep.
        model: model path or Hub id; the embedded default model when unset.
        dtype: weight dtype of the model (every speedup is against ``stock`` at this dtype).
        device: ``auto`` (cuda when available), ``cpu``, ``cuda``, ``cuda:1`` ...
        warmup: untimed generations per method before timing.
        seed: random seed.
        num_threads: torch CPU threads; torch's default when unset.
        json: JSON report path; the resumable progress file is written next to it. A file there that is no bench
            report (a hardware profile) is refused rather than replaced.
        markdown: Markdown report path.
        plots: folder for the PNG plots.
        resume: skip the (question, method) pairs already in the progress file. Without it the file is started
            afresh, which is refused where it holds records that no report at ``json`` holds (an interrupted run).
        report_only: run nothing; report an interrupted run from its progress file (finished questions only).
        report_json: where ``report_only`` writes its JSON (default ``json``, which it refuses to overwrite when that
            holds the finished run's own report).
        progress: show a progress bar.
        reference: the method ``summary[m].speedup`` is relative to (``speedup_vs_stock`` is always
            there too); e.g. ``stock-compiled`` to measure against transformers' own fast path.
        fp32_agreement: below float32, also answer each turn's prompt with a float32 copy of the model
            and report every method's agreement with that answer; the answers are timed right after ``stock``'s
            turn and summarised as the method ``stock-fp32`` (the peer eager float32 stock); ``--no_fp32_agreement``
            skips them (one eager float32 stock generation per turn, the longest part of a run at long lengths).
        keep_outputs: keep every method's generated tokens in the report and progress file, not only ``stock``'s.
    """

    _argument_group_name = "benchmark"

    questions: Path = field(default=DEFAULT_QUESTIONS, metadata={"help": "Spec-Bench / MT-bench JSONL question file."})
    methods: str = field(
        default=DEFAULT_METHODS,
        metadata={
            "help": "Comma-separated methods; `stock` is always run as the reference. `<method>@D/K/N` runs tree, "
            "eagle3 or eagle3-candidate on its own tree (depth D, top-k K, N tokens), then +lookup, then +sized, then "
            "+fp32 (below float32: the method on a float32 copy of the model, in --fp32_verify_buckets)."
        },
    )
    limit: int | None = field(default=None, metadata={"help": "Run only the first N questions."})
    per_category: int | None = field(default=None, metadata={"help": "Keep the first N questions of each category."})
    categories: str | None = field(default=None, metadata={"help": "Comma-separated categories to keep."})
    model: str | None = field(default=None, metadata={"help": "Model path or Hub id (default: SmolLM2-135M-Instruct)."})
    dtype: Literal["float32", "bfloat16"] = field(default="float32", metadata={"help": "Model weight dtype."})
    device: str = field(default="auto", metadata={"help": "auto, cpu, cuda, cuda:N ..."})
    warmup: int = field(default=2, metadata={"help": "Untimed generations per method before timing."})
    seed: int = field(default=0, metadata={"help": "Random seed."})
    num_threads: int | None = field(default=None, metadata={"help": "torch CPU threads."})
    json: Path | None = field(
        default=None,
        metadata={"help": "JSON report path (progress file goes next to it); a file there that is no bench report "
                  "(a hardware profile) is refused rather than replaced."},
    )
    markdown: Path | None = field(default=None, metadata={"help": "Markdown report path."})
    plots: Path | None = field(default=None, metadata={"help": "Folder for the PNG plots."})
    resume: bool = field(
        default=False,
        metadata={
            "help": "Skip (question, method) pairs already done (needs --json). Without it, a progress file holding "
            "records no report at --json holds (an interrupted run) is refused rather than started afresh."
        },
    )
    report_only: bool = field(
        default=False,
        metadata={
            "help": "Run nothing: write the report (--json, --markdown, --plots) of an interrupted run from its "
            "progress file, over the selected questions that every method finished (marked partial)."
        },
    )
    report_json: Path | None = field(
        default=None,
        metadata={
            "help": "With --report_only (or a --resume with nothing left to run): write the rebuilt JSON here "
            "instead of over --json (needed when --json holds the finished run's own report, which keeps the "
            "warm-up's compile seconds the progress file lacks)."
        },
    )
    progress: bool = field(default=True, metadata={"help": "Show a progress bar (--no-progress hides it)."})
    reference: str = field(
        default="stock", metadata={"help": "Method the summary's speedup is relative to (speedup_vs_stock is kept)."}
    )
    fp32_agreement: bool = field(
        default=True,
        metadata={
            "help": "Below float32, report each method's agreement with a float32 stock answer, timed as the "
            "row stock-fp32 (eager float32 stock); --no_fp32_agreement skips it: an eager float32 generation per turn."
        },
    )
    keep_outputs: bool = field(
        default=False, metadata={"help": "Keep every method's generated tokens in the report, not only stock's."}
    )

    @property
    def method_names(self) -> list[str]:
        """``methods`` split on commas."""
        return split_csv(self.methods)

    @property
    def category_names(self) -> list[str] | None:
        """``categories`` split on commas, or None for all."""
        return split_csv(self.categories) if self.categories else None


@dataclass
class MethodOptions:
    """How the methods decode: shared generation settings and each method's own knobs.

    Args:
        max_new_tokens: tokens generated per turn (fewer when the model stops).
        temperature: 0 decodes greedily and checks every output token for token against
            ``stock``; above 0 every method samples at this temperature from the whole distribution
            (every truncating warper off: :func:`~hf_adaptive_spec.core.settings.sampling_kwargs`), each turn
            seeded alike, and outputs match ``stock``'s in distribution only, so the identity check
            is skipped (the sampling tests of the test suite check the distribution).
        prompt_lookup_num_tokens: draft length of ``hf-prompt-lookup``.
        lookup_tokens / lookup_ngram_size: the prompt-lookup branch of ``<method>+lookup``
            (tokens grafted per cycle; longest suffix n-gram matched). ``lookup_tokens`` defaults to
            ``tree_profile``'s recommended branch when it has one, else :data:`DEFAULT_LOOKUP_TOKENS`.
        early_exit_layers: K, the layers ``hf-early-exit`` drafts with.
        drafter_layers: layers of the target forming the small drafter of ``hf-assistant`` and ``tree``.
        num_assistant_tokens: draft length of ``hf-early-exit``/``hf-assistant`` (transformers: 20).
        num_assistant_tokens_schedule: their draft-length schedule (transformers: constant).
        assistant_confidence_threshold: their draft stop threshold (transformers: 0.4).
        tree_depth / tree_top_k / tree_total_tokens: the static tree of ``tree`` and ``eagle3``:
            draft depth, children per expanded node, tokens verified per cycle (root included).
            Default 2 / 4 / 8, the best of a grid on the compiled bfloat16 path of a 2-core AMD
            EPYC with the prompt-lookup branch; EAGLE-3's GPU default 7 / 10 / 60 ran at 0.5x
            stock on that CPU (eager).
        tree_profile: take ``tree``'s and ``eagle3``'s static tree from this hardware profile's
            recommendation (``hf-adaptive-spec profile --recording``) instead of the three above, and its
            prompt-lookup branch for ``+lookup`` unless ``lookup_tokens`` is given. Refused where no selected method
            takes anything from it, where it was timed on another cost curve, with another CPU thread count or (for
            a method in the run's one compiled cache) in another cache length than the run's, and where a method
            would draft its tree otherwise than ranked (``lookup_first`` or not).
        eagle3_checkpoint: ``eagle3``'s drafter (default: the checkpoint shipped for SmolLM2).
        dvi_exit_layer / dvi_adapter: ``dvi``'s exit layer for a fresh head, or an adapter to load.
        dvi_depth: ``dvi``'s chain length per cycle (the paper's proposal depth: 4).
        ltd_policy / resps_policy / radar_policy: the policies of ``eagle3-ltd``, ``eagle3-resps``
            and ``eagle3-radar`` (folder or Hub id; default: the ones shipped for SmolLM2, which are refused with
            another ``model`` or ``eagle3_checkpoint``: they were trained for SmolLM2 and its shipped drafter).
        candidate_policy: the policy of ``eagle3-candidate-policy`` (any saved policy's folder or Hub id), to compare
            with the shipped ones in one run.
        compile: run every method of this project's engine on the compiled fast path (a fixed
            StaticCache and ``torch.compile``, as ``stock-compiled`` runs stock generate).
        max_cache_len: slots of the StaticCache of ``stock-compiled`` and ``--compile`` (one cache
            shared by all of them); default: enough for the longest question. A value too short for some
            question's first turn is refused before the run, with the questions and the length they need.
        verify_buckets: the fast path's verification sizes (``hfas.fast_path(model, buckets=...)``), e.g.
            ``2,3,4,8``; default: ``tree_profile``'s when given, else the engine's ``8,12,16,32``.
        fp32_verify_buckets: the same for the float32 copy ``+fp32`` methods decode with (their dtype's cost curve,
            e.g. a float32 profile's buckets); default: the engine's ``8,12,16,32``.
    """

    _argument_group_name = "methods"

    max_new_tokens: int = field(default=128, metadata={"help": "Tokens generated per turn."})
    temperature: float = field(
        default=0.0, metadata={"help": "0: greedy, checked against stock; > 0: pure sampling at this temperature."}
    )
    prompt_lookup_num_tokens: int = field(default=10, metadata={"help": "hf-prompt-lookup draft length."})
    lookup_tokens: int | None = field(
        default=None,
        metadata={
            "help": "<method>+lookup: tokens of the prompt-lookup branch (default: --tree_profile's recommended "
            f"branch, else {DEFAULT_LOOKUP_TOKENS})."
        },
    )
    lookup_ngram_size: int = field(
        default=2, metadata={"help": "<method>+lookup: longest n-gram matched (transformers' default 2)."}
    )
    early_exit_layers: int = field(default=8, metadata={"help": "hf-early-exit: layers K the drafts use."})
    drafter_layers: int = field(default=8, metadata={"help": "hf-assistant and tree: target layers in the drafter."})
    num_assistant_tokens: int | None = field(
        default=None, metadata={"help": "hf-early-exit/hf-assistant draft length (transformers' default: 20)."}
    )
    num_assistant_tokens_schedule: Literal["constant", "heuristic", "heuristic_transient"] | None = field(
        default=None, metadata={"help": "hf-early-exit/hf-assistant schedule (transformers' default: constant)."}
    )
    assistant_confidence_threshold: float | None = field(
        default=None, metadata={"help": "hf-early-exit/hf-assistant draft stop threshold (transformers: 0.4)."}
    )
    tree_depth: int = field(default=2, metadata={"help": "tree and eagle3: draft depth (this CPU's best; EAGLE-3: 7)."})
    tree_top_k: int = field(default=4, metadata={"help": "tree and eagle3: children per expanded node (EAGLE-3: 10)."})
    tree_total_tokens: int = field(
        default=8, metadata={"help": "tree and eagle3: tokens verified per cycle, root included (EAGLE-3: 60)."}
    )
    tree_profile: str | None = field(
        default=None,
        metadata={"help": "tree and eagle3: the static tree a hardware profile recommends (profile --recording); "
                  "replaces --tree_depth/--tree_top_k/--tree_total_tokens; +lookup takes its prompt-lookup branch "
                  "unless --lookup_tokens is given. Refused when timed with other --num-threads, on another curve, or "
                  "recommending lookup_first for a method that drafts every cycle (or the reverse), or a tree ranked "
                  "with the branch for a method without +lookup (or the reverse)."},
    )
    dvi_exit_layer: int = field(default=4, metadata={"help": "dvi: layers before the exit head (fresh adapter)."})
    dvi_adapter: str | None = field(default=None, metadata={"help": "dvi: adapter to start from (folder or Hub id)."})
    dvi_depth: int = field(default=4, metadata={"help": "dvi: chain length per cycle (the paper's proposal depth 4)."})
    eagle3_checkpoint: str | None = field(
        default=None, metadata={"help": "eagle3: drafter checkpoint (folder or Hub id); default: the shipped one."}
    )
    candidate_checkpoint: str | None = field(
        default=None, metadata={"help": "eagle3-candidate: a second EAGLE-3 drafter to compare with eagle3's."}
    )
    ltd_policy: str | None = field(
        default=None,
        metadata={"help": "eagle3-ltd: LTD policy (default: the one shipped for SmolLM2 and its drafter)."},
    )
    resps_policy: str | None = field(
        default=None,
        metadata={"help": "eagle3-resps: Re-SpS policy (default: the one shipped for SmolLM2 and its drafter)."},
    )
    radar_policy: str | None = field(
        default=None,
        metadata={"help": "eagle3-radar: RADAR policy (default: the one shipped for SmolLM2 and its drafter)."},
    )
    candidate_policy: str | None = field(
        default=None,
        metadata={
            "help": "eagle3-candidate-policy: a saved policy (folder or Hub id) to compare with the shipped ones."
        },
    )
    compile: bool = field(
        default=False, metadata={"help": "Run this project's engine methods on the compiled static-cache path."}
    )
    max_cache_len: int | None = field(
        default=None,
        metadata={
            "help": "StaticCache length of stock-compiled and --compile (default: fits the questions; one too short "
            "for a question's first turn is refused before the run)."
        },
    )
    verify_buckets: str | None = field(
        default=None, metadata={"help": "--compile: the fast path's verification buckets, e.g. 2,3,4,8 (default: "
                                "--tree_profile's, else the engine's 8,12,16,32)."}
    )

    fp32_verify_buckets: str | None = field(
        default=None, metadata={"help": "--compile: the verification buckets of the float32 copy that +fp32 methods "
                                "decode with, e.g. a float32 profile's 2,3,5,8,12,16,32 (default: the engine's "
                                "8,12,16,32)."}
    )

    @property
    def bucket_sizes(self) -> tuple[int, ...] | None:
        """``verify_buckets`` as distinct ascending sizes of at least 2 (None: not given; ValueError names a bad
        one)."""
        return None if self.verify_buckets is None else buckets_from_text(self.verify_buckets)

    @property
    def fp32_bucket_sizes(self) -> tuple[int, ...] | None:
        """``fp32_verify_buckets`` read as :attr:`bucket_sizes` reads ``verify_buckets``."""
        return None if self.fp32_verify_buckets is None else buckets_from_text(self.fp32_verify_buckets)


def split_csv(text: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]
