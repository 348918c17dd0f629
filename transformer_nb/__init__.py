"""The encoder-decoder Transformer of "Attention Is All You Need", built in the transformer_nb notebooks.

The names a user reaches for first, importable from the package itself; every module (`transformer_nb.model`, `.loss`,
`.fit`, ...) holds more. This file is the one module written by hand: nbdev only keeps its `__version__` line up to
date."""
__version__ = "0.0.1"

from .masks import subsequent_mask, padding_mask, make_std_mask
from .attention import attention, MultiHeadedAttention
from .model import EncoderDecoder, Generator, ModelConfig, make_model, count_parameters
from .batch import Batch
from .schedule import rate, noam_optimizer
from .loss import LabelSmoothing, SimpleLossCompute
from .epoch import TrainState, run_epoch
from .checkpoint import save_checkpoint, read_checkpoint, model_from_checkpoint, average_checkpoints, CheckpointError
from .resume import load_checkpoint
from .fit import train
from .decoding import greedy_decode, beam_search
from .translator import translate, save_translator, load_translator, load_pretrained
from .interop import from_torch, to_torch, model_from_torch
from .distributed import World, world_from_env

__all__ = ["subsequent_mask", "padding_mask", "make_std_mask", "attention", "MultiHeadedAttention", "EncoderDecoder",
           "Generator", "ModelConfig", "make_model", "count_parameters", "Batch", "rate", "noam_optimizer",
           "LabelSmoothing", "SimpleLossCompute", "TrainState", "run_epoch", "train", "save_checkpoint",
           "read_checkpoint", "model_from_checkpoint", "average_checkpoints", "CheckpointError", "load_checkpoint",
           "greedy_decode", "beam_search", "translate", "save_translator", "load_translator", "load_pretrained",
           "from_torch", "to_torch", "model_from_torch", "World", "world_from_env"]
