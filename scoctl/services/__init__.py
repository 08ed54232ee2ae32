"""What several stages share, below them: leadership and fencing (`leadership`), per-launch join
tokens (`join_tokens`), the one teardown path (`teardown`), recording a workload token
(`tokens`), the pod and node informer (`informer`), placement latency (`latency`) and the
metrics textfile's contents (`metrics`). Nothing here imports a stage or a composer.
"""
