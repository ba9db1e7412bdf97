"""Continuations at serving depths (`looped samples`) as the docs show them."""

from __future__ import annotations


def section(result: dict) -> str:
    """The samples as the docs show them: per prompt, each model at each depth, one line each
    (newlines shown as ⏎), with the model's test NLL at that depth."""
    lines = []
    for i, prompt in enumerate(result["prompts"]):
        lines += [f"Prompt `{prompt.replace(chr(10), '⏎')}`:", "", "```text"]
        for label, m in result["models"].items():
            for k in result["depths"]:
                text = m["samples"][str(k)][i].replace("\n", "⏎")
                lines.append(f"{label:<22} K={k:<2} (NLL {m['test_nll'][str(k)]:.2f})  {text}")
        lines += ["```", ""]
    return "\n".join(lines).rstrip()
