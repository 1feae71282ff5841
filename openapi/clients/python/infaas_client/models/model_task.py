from enum import StrEnum


class ModelTask(StrEnum):
    CLASSIFICATION = "classification"

    def __str__(self) -> str:
        return str(self.value)
