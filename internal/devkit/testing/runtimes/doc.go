// Package runtimes holds the tests that drive connhost with the agent
// runtimes people use (@openai/agents, LangChain/LangGraph, the Vercel AI
// SDK, Mastra), through the adapters in clients/js and without them: real
// npm packages, scripted models, real SIGKILLs of the runtime process,
// charges counted at the Stripe emulator.
package runtimes
