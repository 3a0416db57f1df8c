"""Deploy: the policy, the pre-restart gate (`check`) and environment locks (fleet identity)."""
