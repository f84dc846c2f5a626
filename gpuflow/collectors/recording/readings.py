"""A recording's readings over time answering a history query, as the NVML collector's history does.

Each series read from the trace (one per counter track: ``("device", uuid)`` or ``("process",
pid, uuid)`` and a metric) answers the points with ``start_s <= t < end_s``; a series with none
there is left out, and the answer always says the range the readings cover (``retained_from``,
``retained_to``), so a page learns it with any question (docs/recorder.md, "The answer"). What a
trace does not hold is not invented: no roll-up's least and greatest, no point for a reading that
was not available.

Constraints: the series' arrays are never changed (an answer holds slices of them); bisection,
no scan.
"""

from __future__ import annotations

import bisect
from dataclasses import replace

from gpuflow.core.recorded import HistoryPart, Series


class Readings:
    """A recording's series and the range they cover."""

    def __init__(self, series: tuple[Series, ...]) -> None:
        self.series = tuple(s for s in series if len(s.t_s))
        self.first_s = min((s.t_s[0] for s in self.series), default=None)
        self.last_s = max((s.t_s[-1] for s in self.series), default=None)

    def query(self, start_s: float, end_s: float, source: str) -> HistoryPart | None:
        """The points in ``[start_s, end_s)``; None for a recording without readings."""
        if not self.series:
            return None
        found = []
        for s in self.series:
            a, b = bisect.bisect_left(s.t_s, start_s), bisect.bisect_left(s.t_s, end_s)
            if a < b:
                found.append(replace(s, t_s=s.t_s[a:b], value=s.value[a:b]))
        return HistoryPart(source=source, retained_from_s=self.first_s, retained_to_s=self.last_s,
                           series=tuple(found))
