"""fluid.contrib.decoder: fluid 1.8's contrib beam-search decoder (InitState, StateCell,
TrainingDecoder, BeamSearchDecoder), superseded in fluid 1.8 by fluid.layers' BeamSearchDecoder
and dynamic_decode, which spmd provides. spmd does not provide these names;
docs/fluid_coverage.md says why.
"""
from ..._pending import missing_names

__all__: list[str] = []

missing_names(globals(), [
    "BeamSearchDecoder", "InitState", "StateCell", "TrainingDecoder"])
