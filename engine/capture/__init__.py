"""The local recording proxy (issue 31): what an agent sent and received, exactly, written to a capture file.

- :mod:`engine.capture.redact`: credentials (headers, query parameters, their values anywhere) kept out of files;
- :mod:`engine.capture.streams`: a streamed answer (SSE) reassembled into the final message and its usage, per
  API family (Anthropic Messages, OpenAI Chat Completions and Responses, the Gemini API);
- :mod:`engine.capture.files`: the capture file (JSON Lines, one exchange a line, fsync'd, mode 0600, rolled
  over past a size limit);
- :mod:`engine.capture.proxy`: the aiohttp reverse proxy on loopback that forwards, streams and records.
"""
