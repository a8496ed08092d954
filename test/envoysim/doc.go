// Package envoysim is a stand-in for Envoy in ext_proc tests, for machines without an
// Envoy binary. It plays the HTTP connection manager, the envoy.filters.http.ext_proc
// filter and the router in front of a real HTTP upstream, talking to a real ext_proc
// gRPC server over a real socket, and it records every protocol violation of that server.
//
// It knows only the public protocol (go-control-plane types and gRPC), never the
// processor under test:
//
//	e, err := envoysim.Start(envoysim.Config{ProcessorAddr: addr, Upstream: "http://" + up,
//		AllowModeOverride: true, MessageTimeout: 5 * time.Second})
//	defer e.Close()
//	resp, _ := http.Post(e.URL()+"/v1/models/m:predict", "application/json", body)
//	if v := e.Violations(); len(v) > 0 { t.Fatal(v) }
//
// gRPC (TF Serving's services in front of a v2 gRPC port): the listener takes h2c too,
// UpstreamHTTP2 makes the cluster h2c, GRPCMode is docs/grpc.md's processing mode:
//
//	e, err := envoysim.Start(envoysim.Config{ProcessorAddr: addr, Upstream: "http://" + v2GRPC,
//		UpstreamHTTP2: true, Mode: envoysim.GRPCMode(), AllowModeOverride: true, MessageTimeout: 5 * time.Second})
//	c, err := tfclient.Dial(strings.TrimPrefix(e.URL(), "http://")) // test/internal/tfclient
//	resp, err := c.Predict(ctx, tfclient.PredictRequest(tfclient.Spec("half_plus_two"), inputs))
//
// # What is faithful
//
// The rules follow Envoy's source (ext_proc.cc, processor_state.cc, mutation_utils.cc,
// mutation_rules.cc, as of 2025-2026):
//
//   - One gRPC stream per HTTP request, opened at the first message; protocol_config on
//     the first message; headers lower-cased, pseudo-headers first, values in raw_value
//     only; x-forwarded-proto and x-request-id added when missing; hop-by-hop headers
//     stripped. The response headers include x-envoy-upstream-service-time.
//   - Order request_headers → request_body → response_headers → response_body. BUFFERED
//     sends the whole body in one message with end_of_stream; a body-less message has
//     end_of_stream on its headers and no body message. Headers are held until the body
//     reply, so a body reply's header mutation applies.
//   - Exactly one reply per message, of the matching kind or immediate_response. Anything
//     else is spurious: 500 (fail closed, envoy PR #39994) or ignored with
//     failure_mode_allow. No reply within message_timeout: 504. A gRPC error: 500 with
//     details ext_proc_error_gRPC_error_<code>{<message>}. A clean close: the request
//     goes on unprocessed. override_message_timeout within max_message_timeout.
//   - Header mutations under the default mutation rules: ":path" may change; host,
//     ":authority", ":scheme", ":method" (except with CONTINUE_AND_REPLACE) and x-envoy*
//     are ignored and counted in rejected_header_mutations; pseudo-headers and host cannot
//     be removed; only the deprecated append field counts (append_action is ignored by
//     ext_proc, envoy#36982); both value and raw_value set, invalid characters, or too
//     many/too large headers: 500. A header given only in `value` is set to "" (Envoy
//     reads raw_value only, envoy#31555).
//   - BUFFERED with headers SEND: a body mutation whose size differs from a present
//     content-length is rejected with a 500; clear_body counts as size 0.
//   - CONTINUE_AND_REPLACE: body replaced (content-length removed), body mode NONE.
//   - mode_override only with allow_mode_override and only in a reply to a headers
//     message; DEFAULT header modes keep the configured value, body modes are always
//     taken from the override, and it applies to both directions.
//   - immediate_response: status 200 when missing or below 200, header mutation under the
//     filter's rules, text/plain for a non-empty body, details with spaces as underscores.
//   - Local replies (FilterManager::sendLocalReply): before any response headers entered
//     the filter chain they run through the encoder filters, so ext_proc processes them
//     (413 of the buffer limit, 503 upstream unreachable, 504 route timeout before the
//     response headers); once response headers are in the chain but not sent downstream
//     (held by a BUFFERED ext_proc) they go straight to the codec, bypassing ext_proc
//     (ext_proc's own immediate_response on the response path, 500 of a response over
//     the buffer limit, 504 when the route timeout passes while a slow response body is
//     buffered); after headers went downstream the stream is reset. With
//     BufferFilterMaxBytes the 413 comes from a buffer filter placed before ext_proc, so
//     the ext_proc stream starts at response_headers.
//   - The route timeout (UpstreamTimeout) runs from the end of the request until the
//     upstream response is complete; x-envoy-expected-rq-timeout-ms is sent upstream.
//   - Buffer limits: a BUFFERED request body over BufferLimit gets 413 "Payload Too Large",
//     a BUFFERED response body over it 500 "Internal Server Error".
//   - A downstream cancel resets the side stream: the processor sees codes.Canceled or
//     io.EOF.
//   - HTTP/2: the listener takes HTTP/1.1 and h2c with prior knowledge (codec_type AUTO);
//     Config.UpstreamHTTP2 makes the cluster h2c (http2_protocol_options). On HTTP/2 no
//     content-length is invented and no connection header sent; te: trailers passes.
//   - Trailers in BUFFERED (and NONE): a message that ends with trailers sends its
//     buffered body (when non-empty) with end_of_stream false, then, with trailer mode
//     SEND, a trailers message whose reply's header mutation applies to the trailers
//     (Filter::onTrailers); with SKIP they pass unchanged. A headers-only answer (gRPC
//     trailers-only) is one headers message with end_of_stream and nothing after.
//     GRPCMode() is the mode of docs/grpc.md: DefaultMode with response trailers SEND.
//   - Local replies to a gRPC request (content-type application/grpc[+...|;...]) are
//     trailers-only, as Utility::prepareLocalReply makes them: :status 200, content-type
//     application/grpc, grpc-status from the processor's header mutation, else
//     immediate_response.grpc_status, else httpToGrpcStatus of the HTTP status, the body
//     percent-encoded into grpc-message, no content-length and no body.
//   - FULL_DUPLEX_STREAMED (either direction, or both), as processor_state.cc and
//     ext_proc.cc implement it since envoy PR #41276, in the items marked "Full duplex".
//   - Full duplex: the config needs trailer mode SEND in that direction (Start fails with
//     Envoy's message otherwise). No buffer limit and no message timer apply (so
//     override_message_timeout is ignored and counted); mode_override is ignored, and
//     counted in ModeOverridesIgnored, in every reply once either body mode is full duplex.
//   - Full duplex: body chunks go to the processor as they arrive, end_of_stream on the
//     last one: the request body in reads of at most DownstreamReadSize bytes, the
//     response body as the upstream's reads return it (normally one chunk per flushed
//     write, at most 64 KiB). They keep flowing while the headers reply is withheld;
//     nothing goes on (upstream or downstream) before that reply.
//   - Full duplex: replies come in protocol order: the headers reply, then any number of
//     body replies whose body_mutation.streamed_response bytes go on in order as they
//     come; end_of_stream ends the body. A body reply before the headers reply, before
//     any chunk was sent or after the body ended, a second headers reply, a reply of the
//     other direction, and a body reply without streamed_response (an empty
//     CommonResponse, body, clear_body) are spurious: 500 and spurious_msgs_received.
//     Header mutations in body replies are ignored (BodyHeaderMutationsIgnored).
//   - Full duplex: the processor sees the client's or upstream's content-length; Envoy
//     removes it right after sending the headers message and drops a content-length the
//     processor sets (ContentLengthSetsDropped), so the message goes on chunked.
//   - Full duplex: failure_mode_allow holds only until the first body chunk reached the
//     filter in a full-duplex direction; later gRPC errors and spurious replies fail
//     closed. A clean close mid-body lets the message go on without what the processor
//     held (Envoy drained it; recorded as a violation).
//   - Full duplex: immediate_response works at any time on the request side (the upstream
//     request is reset) and on the response side until the headers reply was applied;
//     afterwards the stream is reset. CONTINUE_AND_REPLACE in a headers reply sets body
//     mode NONE; its body mutation replaces the body and the rest of the original is
//     drained.
//   - Full duplex: a message with trailers (chunked HTTP/1 from the client or the
//     upstream) sends no end_of_stream on its body; a trailers message follows the last
//     chunk at once, and the trailers reply (its header mutation applied) ends the
//     message, which then goes on with the trailers. end_of_stream in a streamed_response
//     of such a message gets a 500 "envoysim_streamed_body_ended_before_trailers".
//   - Full duplex, our own rule: a streamed_response chunk above MaxStreamedChunk
//     (64 KiB) is a violation. Stats count chunks per direction and the largest each way.
//
// # What is not modelled
//
// TLS downstream or upstream; body modes STREAMED, BUFFERED_PARTIAL and GRPC, and a
// mode_override to FULL_DUPLEX_STREAMED; request trailers of a body that streams through
// unprocessed (body mode NONE: they are dropped; gRPC clients send none); HTTP/1's
// enable_trailers (off in Envoy: the stand-in passes HTTP/1 trailers as if it were on);
// a trailers reply before the headers reply, which Envoy
// would apply and the stand-in treats as spurious;
// send_body_without_waiting_for_header_response; the early close of
// the side stream after the last reply (ext_proc_stream_close_optimization; the
// stand-in closes it when the exchange ends); in full duplex, an upstream answer or
// failure while the request body still streams is handled after the processor ended
// the request body, and the route timeout starts when the request headers go
// upstream, not at the end of the request; a processor that ends a full-duplex body
// before Envoy sent its end gets a 500 "envoysim_streamed_body_ended_early" (Envoy
// would inject the rest after the end of the stream); observability mode;
// request/response attributes and metadata namespaces; per-route configuration; route
// matching and the route cache (one route to one upstream, clear_route_cache is only
// counted); retries; the route timeout passing while the processor handles response
// headers (it is noticed when the body is read, with the same outcome); the race where a request body reaches the limit before the
// request-headers reply arrives (the stand-in waits for that reply before reading the
// body); Envoy's exact header order for repeated and upstream headers (Go's maps lose it;
// entries are sorted by name). Messages that arrive while Envoy is idle (e.g. a second
// reply to one message) are detected when the next message is about to be sent.
//
// Where a real Envoy would forward broken HTTP framing (a content-length that does not
// match the body after processing), the stand-in records a violation and answers 500 with
// details "envoysim_content_length_mismatch" instead.
package envoysim
