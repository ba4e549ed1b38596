"""Run the parallel-dispatch benchmark from Python and read its ratios."""

from __future__ import annotations

from dsh_tools.cli.bench import BenchConfig, run

SMALL = BenchConfig(sizes=(100,), work=2000, rounds=3, in_flight=1000)


def main(config: BenchConfig = SMALL) -> None:
    report = run(config)  # blocks: call it outside trio
    for n, row in report["overhead"]["per_n"].items():
        print(
            f"N={n}: {row['scheduler_us_per_call']:.1f} us per call = "
            f"{row['ratio_to_bare']:.1f}x a bare nursery, "
            f"{row['ratio_to_hand_rolled']:.1f}x json.loads + hand checks"
        )
    pool = report["overlap"]["cap_100"]
    print(f"100 calls sleeping 10 ms: {pool['wall_ms']:.0f} ms, {pool['overlap']:.0f}x overlap")
    barriers = report["barriers"]
    print(
        f"mixed barriers: {barriers['ratio_to_ideal']:.2f}x the ideal {barriers['ideal_ms']:.0f} ms"
    )
    memory = report["memory"]
    print(f"memory: {memory['added_bytes_per_call']} bytes added per in-flight call")


if __name__ == "__main__":
    main()
