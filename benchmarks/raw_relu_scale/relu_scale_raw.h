#pragma once
#define RAW_BENCH_OFFSET 0.0f
