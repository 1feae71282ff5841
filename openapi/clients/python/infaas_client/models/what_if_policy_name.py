from enum import StrEnum


class WhatIfPolicyName(StrEnum):
    HORIZONTAL = "horizontal"
    INFAAS_EXACT = "infaas_exact"
    INFAAS_GREEDY = "infaas_greedy"
    STATIC_PEAK = "static_peak"

    def __str__(self) -> str:
        return str(self.value)
