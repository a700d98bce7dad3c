// Package runtimes holds the tests that drive connhost with the agent
// runtimes people use (@openai/agents, LangChain/LangGraph, the Vercel AI
// SDK, Mastra), through the adapters in clients/js and without them: real
// npm packages, scripted models that count their requests, real SIGKILLs
// of the runtime process, runs resumed from the runtime's own saved state,
// charges counted at the Stripe emulator. TestRecipesAsPasted runs the
// recipes of clients/js/README.md verbatim in new projects outside the
// repository.
package runtimes
