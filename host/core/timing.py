"""Timing with OpenCL profiling events (used by the benchmark and the tuner)."""

import statistics

import pyopencl as cl


def event_seconds(events):
    """Device time from the first event's start to the last event's end (``events``:
    an event, a list of them, or an :class:`~.launch.Events`)."""
    if isinstance(events, cl.Event):
        events = [events]
    elif isinstance(events, dict):          # an Events: every step
        events = events.all()
    events = [e for e in events if e is not None]
    cl.wait_for_events(events)
    start = min(e.profile.start for e in events)
    end = max(e.profile.end for e in events)
    return (end - start) * 1e-9


def time_events(launch, warmup=2, repeats=7):
    """Run ``launch()`` (returns an event, a list of events or an Events) ``warmup`` times,
    then ``repeats`` times; return the list of per-repeat device seconds."""
    for _ in range(warmup):
        event_seconds(launch())
    return [event_seconds(launch()) for _ in range(repeats)]


def summarize(times):
    """(median, coefficient of variation) of a list of times."""
    med = statistics.median(times)
    cv = statistics.pstdev(times) / statistics.mean(times) if len(times) > 1 else 0.0
    return med, cv
