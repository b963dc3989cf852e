/* The node agent's Unix-socket protocol, shared by the agent
 * (stagein/lib/agent.c) and stagein_attach (attach.c).
 *
 * The client sends one line: "attach\n" or "stop\n".
 * attach: the agent answers a uint32_t length (host order: both ends are on
 *   one node) and that many bytes of JSON
 *     {"objects": [{"path": "b/k", "size": N, "mapped": M,
 *                   "checksum": "sha256:..", "gpu": -1}, ...]}
 *   (mapped: the bytes behind the descriptor, size padded for GPU memory),
 *   then one descriptor per object, in table order, over SCM_RIGHTS in
 *   messages of one byte and at most AGENT_FDS_PER_MESSAGE descriptors.
 * stop: the agent answers "ok\n", frees its memory and exits. */
#ifndef STAGEIN_LIB_AGENT_PROTO_H
#define STAGEIN_LIB_AGENT_PROTO_H

#define AGENT_FDS_PER_MESSAGE 64
#define AGENT_TABLE_MAX (64u << 20)   /* bytes of JSON */
#define AGENT_LINE_MAX 64
#define AGENT_IO_TIMEOUT_S 10

#endif
