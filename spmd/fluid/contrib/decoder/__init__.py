"""fluid.contrib.decoder: fluid 1.8's contrib seq2seq decoder (InitState, StateCell,
TrainingDecoder, BeamSearchDecoder over DynamicRNN and While; see beam_search_decoder)."""
from . import beam_search_decoder
from .beam_search_decoder import *  # noqa: F403

__all__ = list(beam_search_decoder.__all__)
