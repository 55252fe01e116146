"""The plots' colours, in one place: one per positional scheme, one per
RoPE context-extension variant, and the extras for ablations (variants of a
scheme, e.g. sinusoidal-scale1), so that a scheme has the same colour in
every report (report.py, long_context_report.py)."""

SCHEME_COLOURS = {"rope": "tab:red", "learned": "tab:blue", "sinusoidal": "tab:green",
                  "t5": "tab:purple", "alibi": "tab:orange", "none": "tab:gray"}
# The long-context study's rope variants (scripts/run/long_context.sh).
ROPE_SCALING_COLOURS = {"rope-linear": "tab:pink", "rope-ntk": "tab:olive", "rope-yarn": "tab:brown",
                        "rope-yarn_paper": "tab:cyan", "rope-dynamic": "black"}
# Ablations of a comparison, in order of appearance: colours no scheme uses.
ABLATION_COLOURS = ["black", "tab:cyan", "tab:olive", "tab:pink", "tab:brown"]


def colour(variant, variants):
    """A scheme's own colour; variants of a scheme (ablations) get colours no scheme uses."""
    if variant in SCHEME_COLOURS:
        return SCHEME_COLOURS[variant]
    extras = [v for v in variants if v not in SCHEME_COLOURS]
    return ABLATION_COLOURS[extras.index(variant) % len(ABLATION_COLOURS)]
