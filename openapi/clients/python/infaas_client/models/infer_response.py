from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.tensor_json import TensorJson


T = TypeVar("T", bound="InferResponse")


@_attrs_define
class InferResponse:
    """
    Attributes:
        accuracy (float): Validation accuracy of the variant, in [0, 1].
        app (str):
        cost (float): Cost of the query in the configured price unit.
        hardware (str):
        latency_ms (float): Latency measured on the server, in milliseconds.
        model (str):
        outputs (list[TensorJson]):
        predicted_ms (float): Latency the selector predicted, in milliseconds.
        reason (str): Why this variant was chosen.
        variant (str): The variant that served the query.
        worker (str):
    """

    accuracy: float
    app: str
    cost: float
    hardware: str
    latency_ms: float
    model: str
    outputs: list[TensorJson]
    predicted_ms: float
    reason: str
    variant: str
    worker: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        accuracy = self.accuracy

        app = self.app

        cost = self.cost

        hardware = self.hardware

        latency_ms = self.latency_ms

        model = self.model

        outputs = []
        for outputs_item_data in self.outputs:
            outputs_item = outputs_item_data.to_dict()
            outputs.append(outputs_item)

        predicted_ms = self.predicted_ms

        reason = self.reason

        variant = self.variant

        worker = self.worker

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "accuracy": accuracy,
                "app": app,
                "cost": cost,
                "hardware": hardware,
                "latency_ms": latency_ms,
                "model": model,
                "outputs": outputs,
                "predicted_ms": predicted_ms,
                "reason": reason,
                "variant": variant,
                "worker": worker,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.tensor_json import TensorJson  # noqa: PLC0415

        d = dict(src_dict)
        accuracy = d.pop("accuracy")

        app = d.pop("app")

        cost = d.pop("cost")

        hardware = d.pop("hardware")

        latency_ms = d.pop("latency_ms")

        model = d.pop("model")

        outputs = []
        _outputs = d.pop("outputs")
        for outputs_item_data in _outputs:
            outputs_item = TensorJson.from_dict(outputs_item_data)

            outputs.append(outputs_item)

        predicted_ms = d.pop("predicted_ms")

        reason = d.pop("reason")

        variant = d.pop("variant")

        worker = d.pop("worker")

        infer_response = cls(
            accuracy=accuracy,
            app=app,
            cost=cost,
            hardware=hardware,
            latency_ms=latency_ms,
            model=model,
            outputs=outputs,
            predicted_ms=predicted_ms,
            reason=reason,
            variant=variant,
            worker=worker,
        )

        infer_response.additional_properties = d
        return infer_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
