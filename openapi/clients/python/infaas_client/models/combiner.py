from enum import StrEnum


class Combiner(StrEnum):
    CONCAT = "concat"
    FIRST = "first"
    MEAN = "mean"
    VOTE = "vote"

    def __str__(self) -> str:
        return str(self.value)
