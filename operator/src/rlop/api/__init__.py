"""The RLJob API: pydantic models (the source of truth) and the CRD generated from them."""
