-- An erase that forgets an owner takes its key out of the shard's mirror too (the key may name
-- a person: nothing of a forgotten owner stays on a shard; router/catalog/mirror.py `forget`,
-- docs/architecture.md "Retention, erase, archive"). Only through this function, one owner at
-- a time: the writer still may not DELETE from shard_owners (or empty it).
CREATE FUNCTION shardlog_forget_owner(owner_kind text, forgotten bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $function$
    DELETE FROM public.shard_owners WHERE kind = owner_kind AND owner_id = forgotten;
$function$;

REVOKE ALL ON FUNCTION shardlog_forget_owner(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shardlog_forget_owner(text, bigint) TO shardlog_writer;
