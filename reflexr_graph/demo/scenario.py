"""The demo's batch of document-triage runs: ordinary ones, one to crash, one poison run, and one whose
escalation waits for an on-call engineer's approval."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TITLES = [
    ("Checkout latency up 40% since deploy", "p99 latency error budget burning"),
    ("Invoice INV-2231 charged twice", "customer asks for a refund"),
    ("Phishing mail reported by finance", "possible credential security issue"),
    ("GDPR data request from a customer", "contract clause 7 applies"),
    ("Weekly newsletter draft", "for review"),
    ("Primary database down in eu-west", "outage, data loss risk, urgent"),
    ("Question about annual payment plan", "billing"),
    ("Vulnerability report from researcher", "security, needs triage"),
    ("Office plants need watering", ""),
    ("Lawsuit notice received", "legal asks for urgent review"),
]


@dataclass
class RunSpec:
    label: str
    inputs: dict[str, Any]
    role: str = "ordinary"
    run_id: str = ""
    notes: list[str] = field(default_factory=list)
    attempts_before_replay: int = 0
    """Attempts a dead-lettered run used before its replay, which starts a fresh count."""

    @property
    def documents(self) -> int:
        return len(self.inputs["documents"])


def _documents(start: int, count: int) -> list[dict[str, str]]:
    picked = [TITLES[(start + i) % len(TITLES)] for i in range(count)]
    return [{"id": f"doc-{start + i}", "title": t, "body": b} for i, (t, b) in enumerate(picked)]


def batch(*, latency_s: float = 0.4, crash_report_s: float = 6.0) -> list[RunSpec]:
    """Six ordinary runs, a run whose report step is slow enough to crash it mid-step, a poison run, and a
    run that waits for approval before it escalates."""
    specs = [
        RunSpec(f"inbox-{n}", {"documents": _documents(n * 3, 3 + n % 3), "latency_s": latency_s})
        for n in range(6)
    ]
    specs.append(
        RunSpec(
            "crash-me",
            {"documents": _documents(20, 6), "latency_s": latency_s, "report_latency_s": crash_report_s},
            role="crash",
        )
    )
    specs.append(RunSpec("poison", {"documents": _documents(30, 3), "fail_until_fixed": True}, role="poison"))
    # Documents 5 and 9 of TITLES (an outage, a lawsuit) make the verdict urgent, so it escalates.
    urgent = _documents(45, 5)
    specs.append(
        RunSpec(
            "on-call", {"documents": urgent, "latency_s": latency_s, "require_approval": True}, "approval"
        )
    )
    return specs
