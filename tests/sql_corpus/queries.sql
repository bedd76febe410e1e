-- name: classify_with_cheap_where
-- shape: Databricks ai_classify / Snowflake AI_CLASSIFY: a label per row, a plain WHERE
-- requests: 8
SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS sentiment FROM reviews WHERE stars >= 4 ORDER BY id;

-- name: query_model_first
-- shape: Databricks ai_query(model, prompt)
-- requests: 3
SELECT id, ai_query('gpt-5-mini', 'Summarize: ' || review) AS summary FROM reviews WHERE id <= 3 ORDER BY id;

-- name: filter_every_row
-- shape: BigQuery AI.IF / Snowflake AI_FILTER in WHERE
-- requests: 20
SELECT id FROM reviews WHERE ai_filter(review, 'The buyer is happy.', model => 'gpt-5-mini') ORDER BY id;

-- name: filter_after_cheap_predicate
-- shape: BigQuery AI.IF after a partition filter
-- requests: 6
SELECT id FROM reviews WHERE category = 'audio' AND ai_filter(review, 'The buyer is happy.', model => 'gpt-5-mini') ORDER BY id;

-- name: complete_limit
-- shape: Snowflake AI_COMPLETE ... LIMIT
-- requests: 3
SELECT ai_complete('Reply to: ' || review, model => 'gpt-5-mini') AS reply FROM reviews LIMIT 3;

-- name: score_per_row
-- shape: BigQuery AI.SCORE
-- requests: 3
SELECT id, ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') AS score FROM reviews WHERE product = 'p1' ORDER BY id;

-- name: errors_are_null
-- shape: Databricks ai_query failOnError => false (errors as NULL)
-- requests: 4
SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label, ai_error(ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini')).kind AS why FROM reviews WHERE stars = 2 ORDER BY id;

-- name: group_by_ai_label
-- shape: Snowflake AI_CLASSIFY in GROUP BY
-- requests: 20
SELECT ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label, count(*) AS n FROM reviews GROUP BY label ORDER BY label NULLS LAST;

-- name: distinct_labels
-- shape: SELECT DISTINCT over an AI column
-- requests: 7
SELECT DISTINCT ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews WHERE category = 'books' ORDER BY label;

-- name: cte_classify_count
-- shape: Databricks docs: WITH labeled AS (... ai_classify ...) SELECT label, count(*) ... GROUP BY label
-- tags: cte
-- requests: 20
WITH labeled AS (SELECT *, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews) SELECT label, count(*) AS n FROM labeled GROUP BY label ORDER BY label NULLS LAST;

-- name: cte_reads_cte
-- shape: a CTE that reads a CTE, the AI call in the second
-- tags: cte
-- requests: 6
WITH audio AS (SELECT * FROM reviews WHERE category = 'audio'), labeled AS (SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM audio) SELECT * FROM labeled ORDER BY id;

-- name: cte_outer_where_pushed
-- shape: an outer WHERE on an input column reaches the CTE's source
-- tags: cte
-- requests: 4
WITH scored AS (SELECT id, stars, ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') AS score FROM reviews) SELECT id, score FROM scored WHERE stars = 5 ORDER BY id;

-- name: cte_outer_limit_pushed
-- shape: an outer LIMIT reaches the CTE's source
-- tags: cte
-- requests: 4
WITH replies AS (SELECT id, ai_complete('Reply to: ' || review, model => 'gpt-5-mini') AS reply FROM reviews) SELECT * FROM replies LIMIT 4;

-- name: two_ctes_with_ai
-- shape: several AI calls in several CTEs
-- tags: cte, subquery
-- requests: 8
WITH neg AS (SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews WHERE stars <= 1), pos AS (SELECT id, ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') AS score FROM reviews WHERE stars >= 5) SELECT (SELECT count(*) FROM neg WHERE label = 'negative') AS negatives, (SELECT avg(score) FROM pos) AS happy_score;

-- name: cte_filter_then_aggregate
-- shape: AI.IF in a CTE, counted outside
-- tags: cte
-- requests: 3
WITH base AS (SELECT * FROM reviews WHERE product = 'p2'), judged AS (SELECT id, ai_filter(review, 'The buyer is happy.', model => 'gpt-5-mini') AS ok FROM base) SELECT count(*) FILTER (WHERE ok) AS happy, count(*) AS n FROM judged;

-- name: cte_ai_read_by_cte
-- shape: a CTE with an AI column read by another CTE
-- tags: cte
-- requests: 20
WITH labeled AS (SELECT *, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews), neg AS (SELECT * FROM labeled WHERE label = 'negative') SELECT product, count(*) AS n FROM neg GROUP BY product ORDER BY product;

-- name: cte_joined_with_table
-- shape: a CTE with an AI column joined to a dimension table
-- tags: cte
-- requests: 20
WITH labeled AS (SELECT *, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews) SELECT p.name, count(*) AS n FROM labeled l JOIN products p USING (product) WHERE l.label = 'positive' GROUP BY p.name ORDER BY p.name;

-- name: cte_with_ai_aggregate
-- shape: Snowflake AI_AGG in a CTE
-- tags: cte, ai_aggregate
-- requests: 3
WITH s AS (SELECT category, ai_summarize_agg(review, model => 'gpt-5-mini') AS summary FROM reviews GROUP BY category) SELECT * FROM s ORDER BY category;

-- name: subquery_where_limit_pushed
-- shape: SELECT * FROM (SELECT id, ai_complete(...) AS s FROM t) WHERE id < 100 LIMIT 5
-- tags: subquery
-- requests: 5
SELECT * FROM (SELECT id, ai_complete('Reply to: ' || review, model => 'gpt-5-mini') AS s FROM reviews) WHERE id < 100 LIMIT 5;

-- name: subquery_qualified_where
-- shape: an aliased FROM subquery filtered on an input column
-- tags: subquery
-- requests: 4
SELECT * FROM (SELECT id, stars, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews) AS t WHERE t.stars = 1 ORDER BY id;

-- name: subquery_grouped_outside
-- shape: AI calls in a FROM subquery, grouped outside
-- tags: subquery
-- requests: 7
SELECT label, count(*) AS n FROM (SELECT ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews WHERE category = 'books') GROUP BY label ORDER BY label;

-- name: subquery_two_levels
-- shape: two nested FROM subqueries, each outer WHERE pushed down
-- tags: subquery
-- requests: 3
SELECT * FROM (SELECT * FROM (SELECT id, ai_complete('Reply to: ' || review, model => 'gpt-5-mini') AS a FROM reviews) WHERE id > 5) WHERE id < 9 ORDER BY id;

-- name: in_subquery_with_filter
-- shape: WHERE x IN (SELECT ... WHERE AI.IF(...))
-- tags: subquery
-- requests: 20
SELECT name FROM products WHERE product IN (SELECT product FROM reviews WHERE ai_filter(review, 'The buyer is happy.', model => 'gpt-5-mini')) ORDER BY name;

-- name: scalar_subquery_with_filter
-- shape: a scalar subquery counting AI.IF rows
-- tags: subquery
-- requests: 8
SELECT count(*) AS products, (SELECT count(*) FROM reviews WHERE stars >= 4 AND ai_filter(review, 'The buyer is happy.', model => 'gpt-5-mini')) AS happy FROM products;

-- name: subquery_averaged
-- shape: AI.SCORE in a subquery, averaged outside
-- tags: subquery
-- requests: 6
SELECT avg(score) AS avg_score FROM (SELECT ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') AS score FROM reviews WHERE category = 'audio');

-- name: ai_agg_per_group
-- shape: Snowflake AI_AGG ... GROUP BY
-- tags: ai_aggregate
-- requests: 3
SELECT category, ai_agg(review, 'List the complaints', model => 'gpt-5-mini') AS complaints, count(*) AS n FROM reviews GROUP BY category ORDER BY category;

-- name: two_ai_aggregates
-- shape: SELECT category, ai_agg(...), ai_summarize_agg(...), count(*) ... GROUP BY category
-- tags: ai_aggregate
-- requests: 6
SELECT category, ai_agg(review, 'List the complaints', model => 'gpt-5-mini') AS complaints, ai_summarize_agg(review, model => 'gpt-5-mini') AS summary, count(*) AS n FROM reviews GROUP BY category ORDER BY category;

-- name: summarize_all
-- shape: Snowflake AI_SUMMARIZE_AGG over a table
-- tags: ai_aggregate
-- requests: 1
SELECT ai_summarize_agg(review, model => 'gpt-5-mini') AS summary FROM reviews;

-- name: ai_agg_with_where
-- shape: AI_AGG over the low-star rows per product
-- tags: ai_aggregate
-- requests: 5
SELECT product, ai_agg(review, 'List the complaints', model => 'gpt-5-mini') AS complaints FROM reviews WHERE stars <= 2 GROUP BY product ORDER BY product;

-- name: ai_agg_beside_scalar_ai
-- shape: an AI aggregate beside a scalar AI call in the same query
-- tags: ai_aggregate
-- requests: 23
SELECT category, ai_agg(review, 'List the complaints', model => 'gpt-5-mini') AS complaints, count(*) FILTER (WHERE ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') = 'positive') AS positive FROM reviews GROUP BY category ORDER BY category;

-- name: having_ai
-- shape: an AI call in HAVING
-- requests: 20
SELECT product, count(*) AS n FROM reviews GROUP BY product HAVING avg(ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini')) >= 3 ORDER BY product;

-- name: order_by_score_limit
-- shape: ORDER BY AI.SCORE(...) DESC LIMIT k: each distinct input scored once (here every row's differs)
-- tags: topk
-- requests: 20
SELECT id FROM reviews ORDER BY ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') DESC, id LIMIT 3;

-- name: order_by_score_limit_cheap_where
-- shape: top-k after a plain WHERE
-- tags: topk
-- requests: 7
SELECT id FROM reviews WHERE category = 'kitchen' ORDER BY ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') DESC, id LIMIT 2;

-- name: order_by_score_limit_repeated_texts
-- shape: top-k over repeated texts (the reviews less their order number: 8 distinct of 20): each distinct text scored once
-- tags: topk
-- requests: 8
SELECT id, ai_score(regexp_replace(review, ' \(order \d+\)', ''), 'How satisfied is the buyer?', model => 'gpt-5-mini') AS score FROM reviews ORDER BY score DESC, id LIMIT 4;

-- name: window_rank_by_score
-- shape: an AI call in a window's ORDER BY
-- requests: 12
SELECT id, rank() OVER (PARTITION BY category ORDER BY ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') DESC, id) AS r FROM reviews WHERE stars >= 3 ORDER BY id;

-- name: window_partition_by_label
-- shape: an AI call in a window's PARTITION BY
-- requests: 3
SELECT id, count(*) OVER (PARTITION BY ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini')) AS same FROM reviews WHERE product = 'p1' ORDER BY id;

-- name: union_all_both_ai
-- shape: AI calls under UNION ALL
-- requests: 8
SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews WHERE stars = 1 UNION ALL SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') FROM reviews WHERE stars = 5 ORDER BY id;

-- name: union_all_one_side_ai
-- shape: UNION ALL of an AI branch and a plain one
-- requests: 3
SELECT id, ai_complete('Reply to: ' || review, model => 'gpt-5-mini') AS text FROM reviews WHERE product = 'p1' UNION ALL SELECT 100 + row_number() OVER (ORDER BY product), name FROM products ORDER BY id;

-- name: semantic_join
-- shape: JOIN ... ON AI.IF(...) (sem_join: what Python's sem_join sends for these 2 x 5 rows, its batched plan)
-- requests: 3
WITH r AS (SELECT id, review FROM reviews WHERE id IN (4, 7)) SELECT r.id, p.name FROM r JOIN products p ON ai_filter(r.review || ' is about ' || p.description, model => 'gpt-5-mini') ORDER BY r.id, p.name;

-- name: semantic_join_then_classify
-- shape: JOIN ... ON AI.IF(...) beside a scalar AI_CLASSIFY in the SELECT list: the join's 3 requests, then 1 for its one pair
-- requests: 4
WITH r AS (SELECT id, review FROM reviews WHERE id IN (4, 7)) SELECT r.id, p.name, ai_classify(r.review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM r JOIN products p ON ai_filter(r.review || ' is about ' || p.description, model => 'gpt-5-mini') ORDER BY r.id, p.name;

-- name: join_then_ai
-- shape: AI calls over a plain join
-- requests: 20
SELECT r.id, p.name, ai_classify(r.review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews r JOIN products p USING (product) WHERE p.name = 'Kettle' ORDER BY r.id;

-- name: system_message_option
-- shape: options as named arguments (Databricks modelParameters)
-- requests: 2
SELECT id, ai_complete('Reply to: ' || review, model => 'gpt-5-mini', system_message => 'Be brief.') AS reply FROM reviews WHERE id IN (1, 2) ORDER BY id;

-- name: same_call_twice
-- shape: one call used twice is computed once
-- requests: 4
SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews WHERE product = 'p4' AND ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') IS NOT NULL ORDER BY id;

-- name: case_over_ai
-- shape: an AI column inside CASE
-- requests: 3
SELECT id, CASE WHEN ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') >= 4 THEN 'promoter' ELSE 'other' END AS kind FROM reviews WHERE product = 'p3' ORDER BY id;

-- name: left_join_limit_pushed
-- shape: a LIMIT over a join of two sources: a LEFT JOIN keeps every left row, so the limit reaches the left source
-- requests: 4
SELECT * FROM (SELECT r.id, p.name, ai_complete('Reply to: ' || r.review, model => 'gpt-5-mini') AS reply FROM reviews r LEFT JOIN products p USING (product) LIMIT 4) ORDER BY id;

-- name: inner_join_limit_not_pushed
-- shape: an inner join may drop left rows: its LIMIT stays DuckDB's, every row the join reads is asked
-- requests: 20
SELECT count(reply) AS n FROM (SELECT r.id, ai_complete('Reply to: ' || r.review, model => 'gpt-5-mini') AS reply FROM reviews r JOIN products p USING (product) LIMIT 4);

-- name: left_semantic_join
-- shape: LEFT JOIN ... ON AI.IF(...): every left row, its matches or NULL (the pairs as sem_join sends them)
-- requests: 3
WITH r AS (SELECT id, review FROM reviews WHERE id IN (4, 7)) SELECT r.id, p.name FROM r LEFT JOIN products p ON ai_filter(r.review || ' is about ' || p.description, model => 'gpt-5-mini') ORDER BY r.id, p.name;

-- name: write_copy_classified_parquet
-- shape: Databricks/Snowflake: the AI results of a query written to a Parquet file (COPY (...) TO); read back
-- requests: 8
-- then: SELECT * FROM '{dir}/labels.parquet'
COPY (SELECT id, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS sentiment FROM reviews WHERE stars >= 4 ORDER BY id) TO '{dir}/labels.parquet' (FORMAT parquet);

-- name: write_copy_limit_csv
-- shape: COPY of a LIMIT query to CSV: the limit reaches the source, 3 rows asked and written
-- requests: 3
-- then: SELECT id, reply FROM read_csv('{dir}/replies.csv') ORDER BY id
COPY (SELECT id, ai_complete('Reply to: ' || review, model => 'gpt-5-mini') AS reply FROM reviews ORDER BY id LIMIT 3) TO '{dir}/replies.csv' (FORMAT csv);

-- name: write_create_table_then_group
-- shape: Snowflake/Databricks CREATE OR REPLACE TABLE ... AS SELECT AI_CLASSIFY(...); a later query reads it, sending nothing
-- requests: 6
-- then: SELECT label, count(*) AS n FROM corpus_labeled GROUP BY label ORDER BY label NULLS LAST
CREATE OR REPLACE TABLE corpus_labeled AS SELECT id, category, ai_classify(review, ['positive', 'negative'], model => 'gpt-5-mini') AS label FROM reviews WHERE category = 'audio';
