"""Operator-level sharding: tensor layouts, shard strategies and redistribution (pure Python;
torch appears only in the conversion to DTensor placements)."""
