-- Time to ready per build and machine class, with percentiles, in milliseconds.
-- Rows with build or machine_class '(all)' sum over that column; the last row is the fleet.
SELECT
  CASE WHEN GROUPING(build_label) = 1 THEN '(all)' ELSE build_label END AS build,
  CASE WHEN GROUPING(class_label) = 1 THEN '(all)' ELSE class_label END AS machine_class,
  COUNT(*) AS traces,
  ROUND(percentile_cont(0.5) WITHIN GROUP (ORDER BY time_to_ready_ns) / 1e6, 1) AS p50_ms,
  ROUND(percentile_cont(0.9) WITHIN GROUP (ORDER BY time_to_ready_ns) / 1e6, 1) AS p90_ms,
  ROUND(percentile_cont(0.99) WITHIN GROUP (ORDER BY time_to_ready_ns) / 1e6, 1) AS p99_ms,
  ROUND(MAX(time_to_ready_ns) / 1e6, 1) AS max_ms
FROM (
  SELECT
    COALESCE(build, '(none)') AS build_label,
    COALESCE(machine_class, '(none)') AS class_label,
    time_to_ready_ns
  FROM traces
  WHERE time_to_ready_ns IS NOT NULL
) AS t
GROUP BY GROUPING SETS ((build_label, class_label), (build_label), (class_label), ())
ORDER BY GROUPING(build_label), build, GROUPING(class_label), machine_class
