module gpu-admission/bench/reliability/loadgen

go 1.22
