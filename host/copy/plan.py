"""The copy plan: work-group size and work-groups per compute unit of the
grid-stride loop; its validation is also the tuner's restriction."""

import dataclasses

from ..core import tuning
from ..core.launch import check_wg_size, wg_candidates

TEMPLATE = "copy.cl.mako"


def _default(device, problem):
    return {"wg_size": device.default_wg_size(), "groups_per_cu": 64}


@dataclasses.dataclass(frozen=True)
class Plan:
    wg_size: int
    groups_per_cu: int
    source: str = "default"

    @classmethod
    def resolve(cls, device, nbytes, **overrides):
        params, source = TUNABLE.resolve(device, {"size": max(int(nbytes), 1)})
        given = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(given) - {"wg_size", "groups_per_cu"}
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
        plan = cls(int({**params, **given}["wg_size"]), int({**params, **given}["groups_per_cu"]),
                   "forced" if given else source)
        plan.validate(device)
        return plan

    def validate(self, device):
        check_wg_size(device, self.wg_size)
        if not 1 <= self.groups_per_cu <= 4096:
            raise ValueError(f"groups_per_cu must be 1..4096, got {self.groups_per_cu}")

    def global_size(self, device, nwords):
        return min(-(-nwords // self.wg_size), device.compute_units * self.groups_per_cu) * self.wg_size


def _restrict(params, device):
    Plan(int(params["wg_size"]), int(params["groups_per_cu"])).validate(device)
    return True


TUNABLE = tuning.register(tuning.Tunable(
    op="copy",
    templates=[TEMPLATE],
    space={"wg_size": lambda device: wg_candidates(device, 64, 1024),
           "groups_per_cu": [4, 8, 16, 32, 64, 128]},
    default=_default,
    restrict=_restrict,
    problem_defaults={"dtype": "uint8", "dims": 1},
))
