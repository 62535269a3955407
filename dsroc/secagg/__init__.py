"""Secure aggregation: distributed discrete Gaussian noise and pairwise masking (Bonawitz et al. 2017)."""

from .masking import (MASK_BITS, PLAUSIBLE_BOUND, SEED_BYTES, advertisement_message, check_plausible, expand_seed,
                      mask_vector, masked_digest, pair_seed, receipt_message, remove_pair_masks, request_digest,
                      round_transcript, seed_commitment, survivors_message, unmask_sum)
from ..privacy.distributed import summed_noise_log_pmf, summed_noise_pld, summed_noise_variance
from .noise import honest_shares, share_sigma, shares_meet

__all__ = ["MASK_BITS", "PLAUSIBLE_BOUND", "SEED_BYTES", "advertisement_message", "check_plausible", "expand_seed",
           "mask_vector", "masked_digest", "pair_seed", "receipt_message", "request_digest", "round_transcript",
           "seed_commitment", "unmask_sum", "remove_pair_masks", "survivors_message",
           "honest_shares", "share_sigma", "shares_meet", "summed_noise_log_pmf", "summed_noise_pld", "summed_noise_variance"]
