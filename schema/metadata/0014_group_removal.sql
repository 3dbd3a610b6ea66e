-- An empty shard group can be removed (DELETE /v1/admin/groups/{name}, `shardlog groups
-- remove`): the catalog role may delete its row. A group that shards or owners still name is
-- kept by their foreign keys whatever the router checks first (router/catalog/store.py).
GRANT DELETE ON shard_groups TO shardlog_catalog;
