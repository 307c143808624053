/* tests/test_chat_spec.c -- src/text/chat_spec*.c: b11669's specialised chat parsers
 * (common_chat_params_init_<name>). The expected values are testing/kit_chat.cpp's on
 * libllama-common b11669 for the shared template named in each row (the arena text, or its
 * sha256 when long; grammar_lazy; the triggers; the grammar's sha256; the parse of one
 * answer; supports_thinking, the thinking tags and the preserved tokens); the template
 * text given here keeps only the substring the init tests ("<think>", "function_calls").
 * Then the refusals: a parser not ported, a template with none, a schema b11669 rejects. */
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "sampling/peg_grammar.h"
#include "test.h"
#include "text/chat_gen.h"
#include "text/chat_peg.h"

typedef struct {
    ca_specialized spec;
    const char *tmpl;           /* the substring the init looks for */
    const char *inputs;         /* tools, tool_choice, parallel_tool_calls, reasoning_format, thinking_disabled */
    const char *gen_prompt;
    const char *arena;          /* the arena text, or its sha256 (exact 0) */
    int exact, lazy;
    const char *triggers;       /* "<type> <value>" lines */
    const char *grammar_sha;    /* "" for no grammar */
    const char *answer;
    const char *parsed;         /* chat_peg_parse's message, final */
    const char *meta;           /* supports_thinking|start tag|end tags|preserved tokens */
} tcs_row;

static const tcs_row TCS_ROWS[] = {
    {CA_SPEC_QWEN3_CODER, "", "{\"thinking_disabled\": false}", "<|im_start|>assistant\n",
     "{\"parsers\":[{\"type\":\"literal\",\"literal\":\"<|im_start|>assistant\\n\"},{\"type\":\"epsilon\"},{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":2,\"tag\":\"content\"},{\"type\":\"space\"},{\"type\":\"sequence\",\"children\":[1,4,3]},{\"type\":\"sequence\",\"children\":[0,1,4,3]}],\"rules\":{},\"root\":6}", 1, 0,
     "",
     "",
     "Hi",
     "{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":\"\",\"tool_calls\":[]}",
     "0|||<tool_call> </tool_call>"},
    {CA_SPEC_QWEN3_CODER, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"thinking_disabled\": false}", "<|im_start|>assistant\n",
     "f4d5127482537ef833f978d3e7c8f02ab06fd527a1f3b5649c34397988f6ee6b", 0, 1,
     "1 <tool_call>\n1 <function=get_weather>",
     "90e1adc837afc87aeb90596c922a3c611c474e6f43f6449342ef9737328afc5c",
     "Let me see.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
     "{\"role\":\"assistant\",\"content\":\"Let me see.\\n\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\",\"id\":\"\"}]}",
     "0|||<tool_call> </tool_call>"},
    {CA_SPEC_QWEN3_CODER, "<think>", "{\"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|im_start|>assistant\n<think>\n",
     "{\"parsers\":[{\"type\":\"literal\",\"literal\":\"<|im_start|>assistant\\n\"},{\"type\":\"epsilon\"},{\"type\":\"literal\",\"literal\":\"<tool_call>\"},{\"type\":\"and\",\"child\":2},{\"type\":\"literal\",\"literal\":\"</think>\"},{\"type\":\"choice\",\"children\":[4,3]},{\"type\":\"until\",\"delimiters\":[\"</think>\",\"<tool_call>\"]},{\"type\":\"tag\",\"child\":6,\"tag\":\"reasoning\"},{\"type\":\"space\"},{\"type\":\"literal\",\"literal\":\"<think>\"},{\"type\":\"sequence\",\"children\":[9,8]},{\"type\":\"sequence\",\"children\":[9,8,7]},{\"type\":\"sequence\",\"children\":[9,8,7,5]},{\"type\":\"repetition\",\"child\":12,\"min_count\":0,\"max_count\":1},{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":14,\"tag\":\"content\"},{\"type\":\"space\"},{\"type\":\"sequence\",\"children\":[13,16,15]},{\"type\":\"sequence\",\"children\":[0,13,16,15]}],\"rules\":{},\"root\":18}", 1, 0,
     "",
     "",
     "Hmm.\n</think>\n\nSunny.",
     "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"reasoning_content\":\"Hmm.\\n\",\"tool_calls\":[]}",
     "1|<think>|\n</think> </think> <tool_call>|<tool_call> </tool_call> <think> </think>"},
    {CA_SPEC_QWEN3_CODER, "<think>", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"required\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|im_start|>assistant\n<think>\n",
     "994f9c3a3fc6a64627bb0cdc8feef10fe8517f44006c83fc9b3dbe0969de5e92", 0, 0,
     "",
     "cf3d6779a8cdc7cd96551494a909fdf2b2771c4505a3d084fd5b3accc954e284",
     "Hmm.<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Hmm.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"id\":\"\"}]}",
     "1|<think>|\n</think> </think> <tool_call>|<tool_call> </tool_call> <think> </think>"},
    {CA_SPEC_MINISTRAL_3, "", "{\"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "",
     "{\"parsers\":[{\"type\":\"epsilon\"},{\"type\":\"until\",\"delimiters\":[\"[/THINK]\"]},{\"type\":\"tag\",\"child\":1,\"tag\":\"reasoning\"},{\"type\":\"literal\",\"literal\":\"[THINK]\"},{\"type\":\"sequence\",\"children\":[3,2]},{\"type\":\"literal\",\"literal\":\"[/THINK]\"},{\"type\":\"sequence\",\"children\":[3,2,5]},{\"type\":\"repetition\",\"child\":6,\"min_count\":0,\"max_count\":1},{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":8,\"tag\":\"content\"},{\"type\":\"space\"},{\"type\":\"sequence\",\"children\":[7,10,9]},{\"type\":\"sequence\",\"children\":[0,7,10,9]}],\"rules\":{},\"root\":12}", 1, 0,
     "",
     "",
     "[THINK]Hmm.[/THINK]Sunny.",
     "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"reasoning_content\":\"Hmm.\",\"tool_calls\":[]}",
     "1|[THINK]|[/THINK]|[THINK] [/THINK] [TOOL_CALLS] [ARGS]"},
    {CA_SPEC_MINISTRAL_3, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"required\", \"parallel_tool_calls\": true, \"thinking_disabled\": false}", "",
     "ec6ae8052c70f965dbf318a28487a399fe8d22cd8012edf4a0be6cc9b7803ba1", 0, 0,
     "1 [TOOL_CALLS]",
     "0524d68a3e6890fddbf911ee6da0bb82164ffb282d2d994f7c8d4bd93bd0156c",
     "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\", \"days\": 2}",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\",\"id\":\"\"},{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Rome\\\", \\\"days\\\": 2}\",\"id\":\"\"}]}",
     "1|[THINK]|[/THINK]|[THINK] [/THINK] [TOOL_CALLS] [ARGS]"},
    {CA_SPEC_GPT_OSS, "", "{\"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|start|>assistant",
     "3353474ad54303f6d592daeb6df69cd41d6ee244193462f133b2e2df3d24166e", 0, 0,
     "",
     "",
     "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.",
     "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"reasoning_content\":\"Hmm.\",\"tool_calls\":[]}",
     "1|<|channel|>analysis<|message|>|<|end|>|<|channel|> <|constrain|> <|message|> <|start|> <|end|>"},
    {CA_SPEC_GPT_OSS, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"thinking_disabled\": false}", "<|start|>assistant",
     "df06f33ee84a4f61232d43bb834cf0a11c940b39b189d6efd362ec651461c63b", 0, 1,
     "2 ^\\s+to$\n2 ^<\\|channel\\|>(?:commentary|analysis)\\s+to=functions$\n2 <\\|start\\|>assistant(\\s+to)\n2 <\\|start\\|>assistant(<\\|channel\\|>(?:commentary|analysis)\\s+to)",
     "0267d7cf179244cf724d0b65517cb270d9858b312d7eff5d35927f65e063a795",
     " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\",\"id\":\"\"}]}",
     "1|<|channel|>analysis<|message|>|<|end|>|<|channel|> <|constrain|> <|message|> <|start|> <|end|>"},
    {CA_SPEC_FUNCTIONARY_V3_2, "", "{\"thinking_disabled\": false}", "<|start_header_id|>assistant<|end_header_id|>\n\n>>>",
     "{\"parsers\":[{\"type\":\"until\",\"delimiters\":[\">>>\"]},{\"type\":\"tag\",\"child\":0,\"tag\":\"content\"},{\"type\":\"literal\",\"literal\":\"all\\n\"},{\"type\":\"sequence\",\"children\":[2,1]},{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":4,\"tag\":\"content\"},{\"type\":\"literal\",\"literal\":\"all\\n\"},{\"type\":\"sequence\",\"children\":[6,5]},{\"type\":\"literal\",\"literal\":\"<|start_header_id|>assistant<|end_header_id|>\\n\\n>>>\"},{\"type\":\"end\"},{\"type\":\"sequence\",\"children\":[8,6,5]},{\"type\":\"sequence\",\"children\":[8,6,5,9]}],\"rules\":{},\"root\":11}", 1, 0,
     "",
     "",
     "all\nHi",
     "{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":\"\",\"tool_calls\":[]}",
     "0|||>>>all"},
    {CA_SPEC_FUNCTIONARY_V3_2, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"thinking_disabled\": false}", "<|start_header_id|>assistant<|end_header_id|>\n\n>>>",
     "4d44638d348d9c900a1a41ccd193f7f404a282ce69faf8a8ca141e05f7589351", 0, 1,
     "2 >>>(?!all)",
     "cb66efef3effe8c9896965d3bbb84a12b0e132188c36d620f6d1640f884aafd3",
     "get_weather\n{\"city\": \"Paris\"}",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\",\"id\":\"\"}]}",
     "0|||>>>all"},
    {CA_SPEC_KIMI_K2, "", "{\"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|im_assistant|>assistant<|im_middle|>",
     "{\"parsers\":[{\"type\":\"end\"},{\"type\":\"literal\",\"literal\":\"</think>\"},{\"type\":\"repetition\",\"child\":1,\"min_count\":0,\"max_count\":1},{\"type\":\"until\",\"delimiters\":[\"</think>\",\"<|tool_calls_section_begin|>\",\"<|tool_call_begin|>\"]},{\"type\":\"tag\",\"child\":3,\"tag\":\"reasoning\"},{\"type\":\"literal\",\"literal\":\"<think>\"},{\"type\":\"sequence\",\"children\":[5,4]},{\"type\":\"sequence\",\"children\":[5,4,2]},{\"type\":\"repetition\",\"child\":7,\"min_count\":0,\"max_count\":1},{\"type\":\"literal\",\"literal\":\"<|im_assistant|>assistant<|im_middle|>\"},{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":10,\"tag\":\"content\"},{\"type\":\"sequence\",\"children\":[9,8]},{\"type\":\"sequence\",\"children\":[9,8,11]},{\"type\":\"sequence\",\"children\":[9,8,11,0]}],\"rules\":{},\"root\":14}", 1, 0,
     "",
     "",
     "<think>Hmm.</think>Sunny.",
     "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"reasoning_content\":\"Hmm.\",\"tool_calls\":[]}",
     "1|<think>|</think>|<|tool_calls_section_begin|> <|tool_calls_section_end|> <|tool_call_begin|> <|tool_call_argument_begin|> <|tool_call_end|> <think> </think>"},
    {CA_SPEC_KIMI_K2, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|im_assistant|>assistant<|im_middle|>",
     "3e9975bca73d240d31cbb203ecf42d88bd56e393282a0dbd13a12784272f638f", 0, 1,
     "1 <|tool_call_begin|>",
     "76b9bdb41e2e7ad25e0f9b811ce7737d0eb0701d12cd68c02f012467d615040f",
     "<think>Call.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:7<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Call.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\",\"id\":\"functions.get_weather:7\"}]}",
     "1|<think>|</think>|<|tool_calls_section_begin|> <|tool_calls_section_end|> <|tool_call_begin|> <|tool_call_argument_begin|> <|tool_call_end|> <think> </think>"},
    {CA_SPEC_DEEPSEEK_V3_2, "function_calls", "{\"reasoning_format\": \"auto\", \"thinking_disabled\": true}", "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think></think>",
     "{\"parsers\":[{\"type\":\"literal\",\"literal\":\"<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>\"},{\"type\":\"end\"},{\"type\":\"choice\",\"children\":[]},{\"type\":\"epsilon\"},{\"type\":\"literal\",\"literal\":\"</\xef\xbd\x9c" "DSML\xef\xbd\x9c" "function_calls>\"},{\"type\":\"space\"},{\"type\":\"space\"},{\"type\":\"literal\",\"literal\":\"<\xef\xbd\x9c" "DSML\xef\xbd\x9c" "function_calls>\"},{\"type\":\"sequence\",\"children\":[7,6]},{\"type\":\"sequence\",\"children\":[7,6,2]},{\"type\":\"sequence\",\"children\":[7,6,2,5]},{\"type\":\"sequence\",\"children\":[7,6,2,5,4]},{\"type\":\"rule\",\"name\":\"tool-call\",\"child\":11,\"trigger\":true},{\"type\":\"ref\",\"name\":\"tool-call\"},{\"type\":\"epsilon\"},{\"type\":\"epsilon\"},{\"type\":\"repetition\",\"child\":12,\"min_count\":0,\"max_count\":1},{\"type\":\"literal\",\"literal\":\"</think>\"},{\"type\":\"until\",\"delimiters\":[\"</think>\"]},{\"type\":\"literal\",\"literal\":\"<think>\"},{\"type\":\"sequence\",\"children\":[19,18]},{\"type\":\"sequence\",\"children\":[19,18,17]},{\"type\":\"repetition\",\"child\":21,\"min_count\":0,\"max_count\":1},{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":23,\"tag\":\"content\"},{\"type\":\"sequence\",\"children\":[0,22]},{\"type\":\"sequence\",\"children\":[0,22,24]},{\"type\":\"sequence\",\"children\":[0,22,24,1]}],\"rules\":{\"tool-call\":12},\"root\":27}", 1, 0,
     "",
     "",
     "Sunny.",
     "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"reasoning_content\":\"\",\"tool_calls\":[]}",
     "1|<think>|</think> <\xef\xbd\x9c" "DSML\xef\xbd\x9c" "function_calls>|\xef\xbd\x9c" "DSML\xef\xbd\x9c <think> </think>"},
    {CA_SPEC_DEEPSEEK_V3_2, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>",
     "7662a32ebfce358371d5b45f89ae9e5730288853166460c500f3f1e5b104a53e", 0, 1,
     "1 <\xef\xbd\x9c" "DSML\xef\xbd\x9ctool_calls>",
     "c0ffe6d1bb96c797cdf080da8883256276b6b3802f2444edb2fe4b193dd9bcae",
     "Think.\n\n<\xef\xbd\x9c" "DSML\xef\xbd\x9ctool_calls>\n<\xef\xbd\x9c" "DSML\xef\xbd\x9cinvoke name=\"get_weather\">\n<\xef\xbd\x9c" "DSML\xef\xbd\x9cparameter name=\"city\" string=\"true\">Paris</\xef\xbd\x9c" "DSML\xef\xbd\x9cparameter>\n<\xef\xbd\x9c" "DSML\xef\xbd\x9cparameter name=\"days\" string=\"false\">3</\xef\xbd\x9c" "DSML\xef\xbd\x9cparameter>\n</\xef\xbd\x9c" "DSML\xef\xbd\x9cinvoke>\n</\xef\xbd\x9c" "DSML\xef\xbd\x9ctool_calls>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Think.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\",\"id\":\"\"}]}",
     "1|<think>|</think> <\xef\xbd\x9c" "DSML\xef\xbd\x9ctool_calls>|\xef\xbd\x9c" "DSML\xef\xbd\x9c <think> </think>"},
    {CA_SPEC_GEMMA4, "", "{\"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|turn>model\n",
     "33abcb95c0b16b7358705cf8df4fd0039f3c6ec57b8dd08b1d7dfbc5903da956", 0, 0,
     "",
     "",
     "<|channel>thought\nHmm.<channel|>Sunny.",
     "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"reasoning_content\":\"Hmm.\",\"tool_calls\":[]}",
     "1|<|channel>thought|<channel|>|<|channel> <channel|> <|tool_call> <tool_call|> <|turn>"},
    {CA_SPEC_GEMMA4, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"thinking_disabled\": false}", "<|turn>model\n",
     "2effb1de8418ed1f9ff107030d1ab520d92a6e25436183d16c3a21dd97247d70", 0, 1,
     "1 <|tool_call>",
     "d158748533c2e7aabaabd2e08e7b4e2b2c65f60cf25485a8bf635e20066bc5c3",
     "Sure.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>",
     "{\"role\":\"assistant\",\"content\":\"Sure.\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\",\"id\":\"\"}]}",
     "1|<|channel>thought|<channel|>|<|channel> <channel|> <|tool_call> <tool_call|> <|turn>"},
    {CA_SPEC_GIGACHAT_V3, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"thinking_disabled\": false}", "assistant<|role_sep|>\n",
     "d762d06ced04092b540ad70774ec1dc00cb8002728c1da00c3ff84359d14e89b", 0, 1,
     "1 <|message_sep|>\n\nfunction call<|role_sep|>\n",
     "19067f258f351125d86776411e41b5f6ad523ba1bff73c25ed523a86c09ef61a",
     "Ok.<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
     "{\"role\":\"assistant\",\"content\":\"Ok.\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\",\"id\":\"\"}]}",
     "0|||<|message_sep|>\n\n <|role_sep|>\n"},
    {CA_SPEC_COHERE2MOE, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>",
     "cf6b566fe4054846c3aa5a237f32996c63369821e30a7616378f6d52d7fbb861", 0, 1,
     "1 <|START_ACTION|>",
     "cd6c2adbedd70ed9887e5f12437d3047ba730f451faf2f53c0c166c8303a0c09",
     "Think.<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]<|END_ACTION|>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Think.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\",\"id\":\"0\"}]}",
     "1|<|START_THINKING|>|<|END_THINKING|>|<|START_OF_TURN_TOKEN|> <|END_OF_TURN_TOKEN|> <|CHATBOT_TOKEN|> <|USER_TOKEN|> <|SYSTEM_TOKEN|> <|START_THINKING|> <|END_THINKING|> <|START_TEXT|> <|END_TEXT|> <|START_ACTION|> <|END_ACTION|> <|START_TOOL_RESULT|> <|END_TOOL_RESULT|>"},
    {CA_SPEC_MUSE_GLIMMER, "", "{\"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|start|>assistant",
     "{\"parsers\":[{\"type\":\"literal\",\"literal\":\"<|start|>assistant\"},{\"type\":\"rule\",\"name\":\"start\",\"child\":0,\"trigger\":false},{\"type\":\"ref\",\"name\":\"start\"},{\"type\":\"literal\",\"literal\":\"<|eom|>\"},{\"type\":\"until\",\"delimiters\":[\"<|eom|>\"]},{\"type\":\"tag\",\"child\":4,\"tag\":\"reasoning\"},{\"type\":\"literal\",\"literal\":\" to=self<|message|>\"},{\"type\":\"sequence\",\"children\":[6,5]},{\"type\":\"sequence\",\"children\":[6,5,3]},{\"type\":\"rule\",\"name\":\"analysis\",\"child\":8,\"trigger\":false},{\"type\":\"ref\",\"name\":\"analysis\"},{\"type\":\"ref\",\"name\":\"analysis\"},{\"type\":\"literal\",\"literal\":\" to=user\"},{\"type\":\"repetition\",\"child\":12,\"min_count\":0,\"max_count\":1},{\"type\":\"until\",\"delimiters\":[\"<|eot|>\",\"<|eom|>\"]},{\"type\":\"tag\",\"child\":14,\"tag\":\"content\"},{\"type\":\"literal\",\"literal\":\"<|message|>\"},{\"type\":\"sequence\",\"children\":[13,16]},{\"type\":\"sequence\",\"children\":[13,16,15]},{\"type\":\"rule\",\"name\":\"final\",\"child\":18,\"trigger\":false},{\"type\":\"ref\",\"name\":\"final\"},{\"type\":\"sequence\",\"children\":[1,9]},{\"type\":\"repetition\",\"child\":21,\"min_count\":0,\"max_count\":-1},{\"type\":\"sequence\",\"children\":[22,1]},{\"type\":\"sequence\",\"children\":[22,1,19]}],\"rules\":{\"start\":1,\"analysis\":9,\"final\":19},\"root\":24}", 1, 0,
     "",
     "",
     " to=self<|message|>Hmm.<|eom|><|start|>assistant to=user<|message|>Sunny.<|eot|>",
     "{\"role\":\"assistant\",\"content\":\"Sunny.\",\"reasoning_content\":\"Hmm.\",\"tool_calls\":[]}",
     "1|||<|start|> <|message|> <|eom|> <|eot|> <atem:function_calls> <atem:invoke <atem:parameter </atem:parameter> </atem:invoke> </atem:function_calls>"},
    {CA_SPEC_KIMI_K3, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"required\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>",
     "c1858aff064fc34ad09d293200a45a472493554a0c3704451c0b7059186aeef7", 0, 0,
     "1 <|open|>tools<|sep|>",
     "8b320361822d204a544b197c46e7c36c67bb2373006d0e8d77ed7952b7f99b22",
     "Call.<|close|>think<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"0\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Call.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"id\":\"\"}]}",
     "1|<|open|>think<|sep|>|<|close|>think<|sep|>|<|open|> <|close|> <|sep|> <|end_of_msg|>"},
    {CA_SPEC_LING3, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<role>ASSISTANT</role>\n<think>",
     "efcf7ae80c4978a25486f557af6c71d1e1b46758a67b6378e1731e0a90c7885e", 0, 1,
     "1 <tool_call>",
     "682d607374426a3f0e8a216a4abf7bcf5104ec9a9b7e2e7ca7fcc13e2dea0d6f",
     "Think.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call><|role_end|>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Think.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"id\":\"\"}]}",
     "1|<think>|</think> <tool_call>|<think> </think> <tool_call> </tool_call> <arg_key> </arg_key> <arg_value> </arg_value> <|role_end|>"},
    {CA_SPEC_MINICPM5, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|im_start|>assistant\n<think>\n",
     "ba36dd87e283447249cfe875fc1c7f004614aed1c29a0abc060b720b48979b89", 0, 1,
     "1 <function",
     "fd5267a6494898b0e4f6357937ea194fb3b0d690a8492a1ab02e466523bc08f7",
     "<think>Call.</think>\n<function name=\"get_weather\"><param name=\"city\">Paris</param><param name=\"days\">3</param></function>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"<think>Call.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\",\"id\":\"\"}]}",
     "1|<think>|</think>|<function <param </function> </param> <think> </think>"},
    {CA_SPEC_LFM2, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"thinking_disabled\": false}", "<|im_start|>assistant\n",
     "2d52b8b00731c38b7b274d950e59ad7cbe014d6b378bdbef347b8ff8c8e12003", 0, 1,
     "1 <|tool_call_start|>",
     "b6828165b9b3332af71e55424e64f5d1f4d4dd3c295e2d90821f429b4fb1e13b",
     "Ok<|tool_call_start|>[get_weather(city=\"Paris\", days=3)]<|tool_call_end|>",
     "{\"role\":\"assistant\",\"content\":\"Ok\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\",\"id\":\"\"}]}",
     "1|<think>|</think>|<|tool_call_start|> <|tool_call_end|> <think> </think> <|tool_list_start|> <|tool_list_end|>"},
    {CA_SPEC_LFM2_5, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"required\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|im_start|>assistant\n",
     "2d52b8b00731c38b7b274d950e59ad7cbe014d6b378bdbef347b8ff8c8e12003", 0, 0,
     "1 <|tool_call_start|>",
     "835ea3f90a3eb61118ca4dad3ae0b1c1fd55e670960bac8cb5f525dbcb2e14a0",
     "Sure<|tool_call_start|>[get_weather(city='Paris')]<|tool_call_end|>",
     "{\"role\":\"assistant\",\"content\":\"Sure\",\"reasoning_content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"id\":\"\"}]}",
     "1|<think>|</think>|<|tool_call_start|> <|tool_call_end|> <think> </think>"},
    {CA_SPEC_MINIMAX_M3, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "]~b]ai\n",
     "d6c0fe78aaf32015e7ff1f34be8fa4092c0fc5962e57ba99be0f9f3947b3d657", 0, 1,
     "1 ]<]minimax[>[<tool_call>",
     "96cba20cbdc1b0a0fef887963f43ab2fcf5acd386997e57bbf8938df682752e8",
     "<mm:think>Hm.</mm:think>]<]minimax[>[<tool_call>]<]minimax[>[<invoke name=\"get_weather\">]<]minimax[>[<city>Paris]<]minimax[>[</city>]<]minimax[>[<days>3]<]minimax[>[</days>]<]minimax[>[</invoke>]<]minimax[>[</tool_call>",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Hm.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\",\"id\":\"\"}]}",
     "1|<mm:think>|</mm:think>|]<]minimax[>[ <tool_call> </tool_call> <mm:think> </mm:think>"},
    {CA_SPEC_K2_HORIZON, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|ifm|im_start|>assistant\n",
     "44e98d5f911fb809456c39245042dba4c4317aefd2159d79ba5ba7421b8bd9b7", 0, 1,
     "1 <ifm|tool_calls>",
     "c89c8918f2fd6c7a6adeb8e6b5956c1e0e7f43bfcf7217e80105d5d5671ebdfa",
     "<ifm|think>Hm.</ifm|think>Ok.<ifm|tool_calls><ifm|tool_call>get_weather\n<ifm|arg_key>city</ifm|arg_key><ifm|arg_value>Paris</ifm|arg_value><ifm|arg_key>days</ifm|arg_key><ifm|arg_value>3</ifm|arg_value></ifm|tool_call></ifm|tool_calls>",
     "{\"role\":\"assistant\",\"content\":\"Ok.\",\"reasoning_content\":\"Hm.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\",\"id\":\"\"}]}",
     "1|<ifm|think>|</ifm|think>|</ifm|think> <ifm|think> <ifm|tool_calls> </ifm|tool_calls> <ifm|tool_call> </ifm|tool_call> <ifm|arg_key> </ifm|arg_key> <ifm|arg_type> </ifm|arg_type> <ifm|arg_value> </ifm|arg_value>"},
    {CA_SPEC_LLM_JP_HARMONY, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"auto\", \"reasoning_format\": \"auto\", \"thinking_disabled\": false}", "<|start|>assistant",
     "ed8a73774d1b969ccfe906763e9ee1278a9569157a9a2cada3f1b77855c6c6b8", 0, 1,
     "2 ^\\s+to$\n2 ^<\\|channel\\|>\\s*(?:commentary|analysis)\\s+to=functions$\n2 <\\|start\\|>\\s*assistant(\\s+to)\n2 <\\|start\\|>\\s*assistant(<\\|channel\\|>\\s*(?:commentary|analysis)\\s+to)",
     "0b815c7e89f5118fe5fe91bb4135564a9000e3f8433464285556c13051e15bd2",
     "<|channel|>analysis<|message|>Hm.<|end|><|start|> assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Hm.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\",\"id\":\"\"}]}",
     "1|<|channel|>analysis<|message|>|<|end|>|<|channel|> <|constrain|> <|message|> <|start|> <|end|>"},
    {CA_SPEC_TRANSLATE_GEMMA, "", "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}], \"tool_choice\": \"required\", \"thinking_disabled\": false}", "<start_of_turn>model\n",
     "{\"parsers\":[{\"type\":\"literal\",\"literal\":\"<start_of_turn>model\\n\"},{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":1,\"tag\":\"content\"},{\"type\":\"space\"},{\"type\":\"sequence\",\"children\":[0,3,2]}],\"rules\":{},\"root\":4}", 1, 0,
     "",
     "",
     "Bonjour",
     "{\"role\":\"assistant\",\"content\":\"Bonjour\",\"reasoning_content\":\"\",\"tool_calls\":[]}",
     "0|||"},
};

static void tcs_sha(const char *p, size_t n, char hex[65])
{
    uint8_t d[32];
    sha256(p, n, d);
    sha256_hex(d, hex);
}

static void tcs_join(jbuf *b, char **v, size_t n, char sep)
{
    for (size_t i = 0; i < n; i++) {
        if (i) jbuf_putc(b, sep);
        jbuf_puts(b, v[i]);
    }
}

static chat_tool_choice tcs_choice(const json_value *in)
{
    const json_value *t = json_get(in, "tool_choice");
    if (t && t->type == JSON_STRING && !strcmp(t->str, "required")) return CHAT_TOOL_CHOICE_REQUIRED;
    if (t && t->type == JSON_STRING && !strcmp(t->str, "none")) return CHAT_TOOL_CHOICE_NONE;
    return CHAT_TOOL_CHOICE_AUTO;
}

static void tcs_one(const tcs_row *r, size_t k)
{
    char err[512];
    json_value *in = json_parse(r->inputs, strlen(r->inputs), err, sizeof err);
    CHECK(in != NULL);
    if (!in) return;
    chat_gen_inputs gi;
    memset(&gi, 0, sizeof gi);
    gi.tools = json_get(in, "tools");
    gi.tool_choice = tcs_choice(in);
    json_is_bool(json_get(in, "parallel_tool_calls"), &gi.parallel_tool_calls);
    const json_value *rf = json_get(in, "reasoning_format");
    gi.reasoning_format = rf && rf->type == JSON_STRING && !strcmp(rf->str, "auto") ? CHAT_REASONING_AUTO : CHAT_REASONING_NONE;
    json_is_bool(json_get(in, "thinking_disabled"), &gi.thinking_disabled);
    gi.generation_prompt = r->gen_prompt;
    gi.generation_prompt_len = strlen(r->gen_prompt);
    chat_gen_params p;
    int rc = chat_gen_specialized(r->spec, r->tmpl, strlen(r->tmpl), &gi, &p, err, sizeof err);
    if (rc != CHAT_GEN_OK) test_fail(__FILE__, __LINE__, "row %zu: rc %d: %s", k, rc, err);
    else {
        jbuf b;
        jbuf_init(&b);
        peg_save(&p.arena, &b);
        jbuf_putc(&b, 0);
        char hex[65];
        if (r->exact) {
            CHECK_STR(b.p, r->arena);
        } else {
            tcs_sha(b.p, b.len - 1, hex);
            CHECK_STR(hex, r->arena);
        }
        CHECK_INT(p.grammar_lazy, r->lazy);
        CHECK_INT(p.has_grammar, r->grammar_sha[0] != 0);
        b.len = 0;
        for (size_t i = 0; i < p.ntriggers; i++) jbuf_printf(&b, "%s%d %s", i ? "\n" : "", p.triggers[i].type, p.triggers[i].value);
        jbuf_putc(&b, 0);
        CHECK_STR(b.p, r->triggers);
        if (p.has_grammar) {
            char *g = NULL;
            size_t gn = 0;
            CHECK_INT(peg_build_grammar(&p.arena, p.grammar_lazy, &g, &gn), 0);
            tcs_sha(g ? g : "", gn, hex);
            CHECK_STR(hex, r->grammar_sha);
            free(g);
        }
        chat_msg m;
        CHECK_INT(chat_peg_parse(&p.arena, p.format, p.generation_prompt, p.generation_prompt_len, r->answer,
                                 strlen(r->answer), 0, &m, err, sizeof err), CHAT_PEG_OK);
        b.len = 0;
        chat_msg_put_json(&m, &b);
        jbuf_putc(&b, 0);
        CHECK_STR(b.p, r->parsed);
        chat_msg_free(&m);
        b.len = 0;
        jbuf_printf(&b, "%d|%s|", p.supports_thinking, p.thinking_start_tag);
        tcs_join(&b, p.thinking_end_tags, p.nthinking_end_tags, ' ');
        jbuf_putc(&b, '|');
        tcs_join(&b, p.preserved_tokens, p.npreserved, ' ');
        jbuf_putc(&b, 0);
        CHECK_STR(b.p, r->meta);
        CHECK_STR(p.thinking_end_tag ? p.thinking_end_tag : "", p.nthinking_end_tags ? p.thinking_end_tags[0] : "");
        jbuf_free(&b);
    }
    chat_gen_free(&p);
    json_free(in);
}

TEST(chat_spec_kit_rows)
{
    for (size_t k = 0; k < sizeof TCS_ROWS / sizeof *TCS_ROWS; k++) tcs_one(&TCS_ROWS[k], k);
}

TEST(chat_spec_refusals)
{
    chat_gen_inputs gi;
    memset(&gi, 0, sizeof gi);
    chat_gen_params p;
    char err[256];
    CHECK_INT(chat_gen_specialized((ca_specialized)99, "", 0, &gi, &p, err, sizeof err), CHAT_GEN_UNSUPPORTED);
    CHECK_STR(err, "no specialised chat parser of b11669 has the number 99");
    chat_gen_free(&p);
    CHECK_INT(chat_gen_specialized(CA_SPEC_NONE, "", 0, &gi, &p, err, sizeof err), CHAT_GEN_ERROR);
    CHECK_STR(err, "the template takes no specialised parser: chat_gen builds its parser");
    chat_gen_free(&p);
    /* a tool schema b11669's schema reader rejects: its reason */
    static const char tools[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                                "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"strin\"}}}}}]";
    json_value *t = json_parse(tools, sizeof tools - 1, err, sizeof err);
    CHECK(t != NULL);
    gi.tools = t;
    static const ca_specialized all[12] = {CA_SPEC_QWEN3_CODER, CA_SPEC_MINISTRAL_3, CA_SPEC_GPT_OSS,
                                           CA_SPEC_FUNCTIONARY_V3_2, CA_SPEC_KIMI_K2, CA_SPEC_DEEPSEEK_V3_2,
                                           CA_SPEC_COHERE2MOE, CA_SPEC_MUSE_GLIMMER, CA_SPEC_LING3, CA_SPEC_MINICPM5,
                                           CA_SPEC_GIGACHAT_V3, CA_SPEC_MINIMAX_M3};
    for (size_t i = 0; i < 12; i++) {
        CHECK_INT(chat_gen_specialized(all[i], "", 0, &gi, &p, err, sizeof err), CHAT_GEN_ERROR);
        CHECK_STR(err, "JSON schema error at #/properties/x: unrecognized type strin");
        chat_gen_free(&p);
    }
    /* tool_choice none: no tool parser, no grammar (Qwen3-Coder's content parser) */
    gi.tool_choice = CHAT_TOOL_CHOICE_NONE;
    CHECK_INT(chat_gen_specialized(CA_SPEC_QWEN3_CODER, "", 0, &gi, &p, err, sizeof err), CHAT_GEN_OK);
    CHECK_INT(p.has_grammar, 0);
    CHECK_INT(p.ntriggers, 0);
    CHECK_INT(p.arena.n, 7);
    chat_gen_free(&p);
    json_free(t);
}

/* hostile tools and schemas: every init answers OK, or ERROR with a reason (no crash, no leak under ASan) */
TEST(chat_spec_hostile_inputs)
{
    static const char *const tools[] = {
        "[1, \"x\", null, [], {}]",
        "[{\"type\":\"function\"}]",
        "[{\"type\":\"function\",\"function\":{}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":7}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":\"x\"}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"properties\":[1,2]}}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":7}}}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"a\":{\"anyOf\":[]}},\"required\":\"a\"}}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"a\":{\"type\":[\"array\",\"object\"],\"items\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":[]}}}}}}}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"\\u0000\\\"<|x|>\",\"parameters\":{\"type\":\"object\",\"properties\":"
        "{\"\":{\"type\":\"object\",\"properties\":{\"z\":{\"$ref\":\"#/nope\"}}}}}}}]",
    };
    static const ca_specialized all[] = {
        CA_SPEC_MINISTRAL_3, CA_SPEC_GPT_OSS, CA_SPEC_MUSE_GLIMMER, CA_SPEC_FUNCTIONARY_V3_2, CA_SPEC_KIMI_K2,
        CA_SPEC_KIMI_K3, CA_SPEC_LING3, CA_SPEC_COHERE2MOE, CA_SPEC_LFM2, CA_SPEC_LFM2_5, CA_SPEC_GIGACHAT_V3,
        CA_SPEC_MINIMAX_M3, CA_SPEC_DEEPSEEK_V3_2, CA_SPEC_GEMMA4, CA_SPEC_GEMMA4_OUTDATED, CA_SPEC_MINICPM5,
        CA_SPEC_TRANSLATE_GEMMA, CA_SPEC_QWEN3_CODER, CA_SPEC_LLM_JP_HARMONY, CA_SPEC_K2_HORIZON};
    size_t ok = 0, refused = 0;
    for (size_t t = 0; t < sizeof tools / sizeof *tools; t++) {
        char err[512];
        json_value *tv = json_parse(tools[t], strlen(tools[t]), err, sizeof err);
        CHECK(tv != NULL);
        if (!tv) continue;
        for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
            for (int choice = 0; choice < 2; choice++) {
                chat_gen_inputs gi;
                memset(&gi, 0, sizeof gi);
                gi.tools = tv;
                gi.tool_choice = choice ? CHAT_TOOL_CHOICE_REQUIRED : CHAT_TOOL_CHOICE_AUTO;
                gi.parallel_tool_calls = choice;
                gi.reasoning_format = CHAT_REASONING_AUTO;
                gi.generation_prompt = "<think>";
                gi.generation_prompt_len = 7;
                chat_gen_params p;
                err[0] = 0;
                int rc = chat_gen_specialized(all[k], "<think>", 7, &gi, &p, err, sizeof err);
                if (rc == CHAT_GEN_OK) {
                    ok++;
                    CHECK(p.arena.root != PEG_INVALID);
                } else {
                    refused++;
                    if (rc != CHAT_GEN_ERROR || !err[0])
                        test_fail(__FILE__, __LINE__, "tools %zu init %d: rc %d, err \"%s\"", t, (int)all[k], rc, err);
                }
                chat_gen_free(&p);
            }
        }
        json_free(tv);
    }
    CHECK_INT(ok, 216);
    CHECK_INT(refused, 184);
}
