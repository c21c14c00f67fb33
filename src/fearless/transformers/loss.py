"""The causal-LM forward of fearless.transformers's `fused_linear_cross_entropy=True`: with
labels (in training, or when asked with `skip_logits=True`) the loss is
`fearless.ops.fused_linear_cross_entropy` of the last hidden states and the LM head, and the
(tokens, vocab) logits are never made (Liger-Kernel's lce_forward idea); Granite's logits,
divided by its `logits_scaling`, are those of the hidden states so divided. Otherwise Hugging
Face's own forward runs. The LM head's gradient sums in its own dtype across the loss's chunks
(the operator's default `accum_dtype`, as Liger's), so that training holds no float32 copy of
it (2 GB at Llama-3's 128K x 4096).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from .. import ops
from .layers import _FLOATS, stand_in


@stand_in
def causal_lm_forward(original: Callable[..., Any]) -> Callable[..., Any]:
    """A `XxxForCausalLM.forward` that computes the loss without logits where it can, and calls
    `original` (Hugging Face's forward) for the rest."""

    def forward(
        self: Any,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        skip_logits: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        shift_labels = kwargs.get("shift_labels")
        has_labels = labels is not None or shift_labels is not None
        skip = (self.training and has_labels) if skip_logits is None else skip_logits and has_labels
        head = self.lm_head
        config = getattr(self, "config", None)
        # Granite divides its logits by logits_scaling: the loss of head(h / s), where the head
        # has no bias (with one, (W h + b) / s is not a head of h / s: Hugging Face's code)
        divisor = getattr(config, "logits_scaling", None) or 1.0
        router = kwargs.get("output_router_logits", getattr(config, "output_router_logits", None))
        takes = (
            skip
            # a mixture of experts' auxiliary loss needs the router logits: Hugging Face's code
            and not router
            # soft-capped logits (Gemma's final_logit_softcapping) are not the kernel's
            and getattr(config, "final_logit_softcapping", None) is None
            # logits_to_keep slices positions for generation: not a loss over all of them
            and isinstance(logits_to_keep, int)
            and logits_to_keep == 0
            and isinstance(head, torch.nn.Linear)
            and head.weight.dtype in _FLOATS
            and (divisor == 1.0 or head.bias is None)
        )
        # the decoder's inputs, which Hugging Face's forward and its model both take as they
        # are; `cache` only when given, so that the deprecated `past_key_values=` in kwargs
        # still reaches the decoder (beside an explicit cache=None, Hugging Face drops it)
        inputs = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "inputs_embeds": inputs_embeds,
            "use_cache": use_cache,
        }
        if cache is not None:
            inputs["cache"] = cache
        if not takes:
            return original(self, **inputs, labels=labels, logits_to_keep=logits_to_keep, **kwargs)
        from transformers.modeling_outputs import CausalLMOutputWithPast, MoeCausalLMOutputWithPast

        return_dict = kwargs.pop("return_dict", None)
        shift_labels = kwargs.pop("shift_labels", None)
        num_items = kwargs.pop("num_items_in_batch", None)
        ignore_index = kwargs.pop("ignore_index", -100)
        outputs = self.model(**inputs, **kwargs)
        hidden = outputs.last_hidden_state
        if shift_labels is None and labels is not None:  # Hugging Face's: i predicts i + 1
            shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
        h = hidden.reshape(-1, hidden.shape[-1])
        weight = head.weight
        if h.dtype != weight.dtype:  # autocast's activations: the kernel takes one dtype
            h = h.to(weight.dtype)
        if divisor != 1.0:
            h = h / divisor
        loss = ops.fused_linear_cross_entropy(
            h,
            weight,
            shift_labels.reshape(-1).to(h.device),
            head.bias,
            ignore_index=ignore_index,
            reduction="mean" if num_items is None else "sum",
        )
        if num_items is not None:  # Hugging Face's gradient-accumulation normalisation
            loss = loss / (num_items.to(loss.device) if torch.is_tensor(num_items) else num_items)
        # a mixture of experts' causal LM returns its own output class (aux_loss None here)
        moe = hasattr(self, "router_aux_loss_coef")
        output = MoeCausalLMOutputWithPast if moe else CausalLMOutputWithPast
        # recent transformers name the cache `cache`, 4 and earlier 5s `past_key_values`: the
        # class's own field
        kept = "cache" if "cache" in output.__dataclass_fields__ else "past_key_values"
        out = output(
            loss=loss,
            logits=None,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **{kept: getattr(outputs, kept, None)},
        )
        return out if return_dict is not False else out.to_tuple()

    return forward
