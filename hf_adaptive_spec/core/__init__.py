"""Primitives shared by the engine and the drafters: the draft tree, tree attention masks,
KV cache compaction, target hidden-state capture and the target's output head."""

from .attention import TREE_MASK_ATTENTION, check_tree_attention_support, tree_attention_mask, tree_extension_mask
from .cost_curve import CostCurve, cost_curve_mismatch
from .features import FeatureCapture, decoder_layers
from .kv_cache import compact_cache, drop_tail, prepare_cache_for_trees
from .output_head import OutputHead, TopLogitsRescorer
from .sequences import common_prefix_length, end_of_sequence_ids
from .static_cache import full_length_static_cache
from .tree import DraftTree, full_tree_size, nodes_in_place

__all__ = [
    "TREE_MASK_ATTENTION",
    "CostCurve",
    "DraftTree",
    "FeatureCapture",
    "OutputHead",
    "TopLogitsRescorer",
    "check_tree_attention_support",
    "common_prefix_length",
    "compact_cache",
    "cost_curve_mismatch",
    "decoder_layers",
    "drop_tail",
    "end_of_sequence_ids",
    "full_length_static_cache",
    "full_tree_size",
    "nodes_in_place",
    "prepare_cache_for_trees",
    "tree_attention_mask",
    "tree_extension_mask",
]
