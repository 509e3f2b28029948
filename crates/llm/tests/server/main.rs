//! Integration tests of `tempra_llm::server`: a server on an ephemeral loopback port over
//! a tiny random model, driven with a real (minimal) HTTP client.
#![cfg(feature = "server")]

mod access;
mod bad_requests;
mod connections;
mod embeddings;
mod endpoints;
mod fixtures;
mod http_client;
mod info_endpoints;
mod logprobs;
mod message_text;
mod readiness;
mod same_tokens;
mod several_choices;
mod slots;
mod structured;
