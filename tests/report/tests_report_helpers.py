from __future__ import annotations


def close(fig) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)
