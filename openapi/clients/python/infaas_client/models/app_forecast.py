from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="AppForecast")


@_attrs_define
class AppForecast:
    """Forecast of an application's arrival rate (Themis §5.1.3): the queries that arrived per
    second over the last ten minutes, the rates predicted for them one and ten seconds ahead,
    the highest rate forecast over the next ten seconds and the errors of both horizons.
    Points are `[second since the Unix epoch, queries/s]`; errors are fractions.

        Attributes:
            app (str):
            horizon_s (int): Seconds ahead of `predicted_10s` and `max_next_10s`.
            max_next_10s (float):
            model (str): The forecasting model in use (it is re-fitted on the application's history).
            observed (list[list[float]]):
            predicted_10s (list[list[float]]): The rate predicted for each second ten seconds before it (including seconds
                to come).
            predicted_1s (list[list[float]]): The rate predicted for each second one second before it.
            mape_10s (float | None | Unset):
            mape_1s (float | None | Unset): Mean absolute percentage error of the 1-second predictions (null before there is
                one).
    """

    app: str
    horizon_s: int
    max_next_10s: float
    model: str
    observed: list[list[float]]
    predicted_10s: list[list[float]]
    predicted_1s: list[list[float]]
    mape_10s: float | None | Unset = UNSET
    mape_1s: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        app = self.app

        horizon_s = self.horizon_s

        max_next_10s = self.max_next_10s

        model = self.model

        observed = []
        for observed_item_data in self.observed:
            observed_item = observed_item_data

            observed.append(observed_item)

        predicted_10s = []
        for predicted_10s_item_data in self.predicted_10s:
            predicted_10s_item = predicted_10s_item_data

            predicted_10s.append(predicted_10s_item)

        predicted_1s = []
        for predicted_1s_item_data in self.predicted_1s:
            predicted_1s_item = predicted_1s_item_data

            predicted_1s.append(predicted_1s_item)

        mape_10s: float | None | Unset
        if isinstance(self.mape_10s, Unset):
            mape_10s = UNSET
        else:
            mape_10s = self.mape_10s

        mape_1s: float | None | Unset
        if isinstance(self.mape_1s, Unset):
            mape_1s = UNSET
        else:
            mape_1s = self.mape_1s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "app": app,
                "horizon_s": horizon_s,
                "max_next_10s": max_next_10s,
                "model": model,
                "observed": observed,
                "predicted_10s": predicted_10s,
                "predicted_1s": predicted_1s,
            }
        )
        if mape_10s is not UNSET:
            field_dict["mape_10s"] = mape_10s
        if mape_1s is not UNSET:
            field_dict["mape_1s"] = mape_1s

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        app = d.pop("app")

        horizon_s = d.pop("horizon_s")

        max_next_10s = d.pop("max_next_10s")

        model = d.pop("model")

        observed = []
        _observed = d.pop("observed")
        for observed_item_data in _observed:
            observed_item = cast(list[float], observed_item_data)

            observed.append(observed_item)

        predicted_10s = []
        _predicted_10s = d.pop("predicted_10s")
        for predicted_10s_item_data in _predicted_10s:
            predicted_10s_item = cast(list[float], predicted_10s_item_data)

            predicted_10s.append(predicted_10s_item)

        predicted_1s = []
        _predicted_1s = d.pop("predicted_1s")
        for predicted_1s_item_data in _predicted_1s:
            predicted_1s_item = cast(list[float], predicted_1s_item_data)

            predicted_1s.append(predicted_1s_item)

        def _parse_mape_10s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mape_10s = _parse_mape_10s(d.pop("mape_10s", UNSET))

        def _parse_mape_1s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mape_1s = _parse_mape_1s(d.pop("mape_1s", UNSET))

        app_forecast = cls(
            app=app,
            horizon_s=horizon_s,
            max_next_10s=max_next_10s,
            model=model,
            observed=observed,
            predicted_10s=predicted_10s,
            predicted_1s=predicted_1s,
            mape_10s=mape_10s,
            mape_1s=mape_1s,
        )

        app_forecast.additional_properties = d
        return app_forecast

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
