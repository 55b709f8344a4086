--[[
  Records what was done to a job or schedule in the deployment's audit trail (see includes/audit), for
  the actions no other script writes (pause, resume, trigger, backfill; upserts and removals write theirs
  in their own scripts).
  KEYS[1] audit stream  KEYS[2] audit index (hash: name -> newest entry ids)
  ARGV[1] name  ARGV[2] action  ARGV[3] who  ARGV[4] detail (JSON)
  ARGV[5] the stream's length cap  ARGV[6] how many ids the index keeps per name
  Returns the entry's id.
]]
--- @include "../../redis/lua/includes/audit"
return recordAudit(KEYS[1], KEYS[2], ARGV[5], ARGV[6], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
