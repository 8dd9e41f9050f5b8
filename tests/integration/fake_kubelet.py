"""A fake kubelet for the tests: the pod-resources API v1 (k8s.io/kubelet/pkg/apis/podresources/v1,
api.proto: service PodResourcesLister, rpc List) served with Debian's python3-grpcio on a UNIX
socket, answering List with the pods and GPUs of a JSON file — [{"namespace", "name", "container",
"devices": ["GPU-..."]}] — read at each call, so a test can change them. The messages are encoded
field by field as api.proto numbers them (ListPodResourcesResponse.pod_resources = 1; PodResources
name = 1, namespace = 2, containers = 3; ContainerResources name = 1, devices = 2;
ContainerDevices resource_name = 1, device_ids = 2), so no generated code is needed.

    python3 fake_kubelet.py SOCKET PODS.json     (prints "ready" once it serves)"""
import json
import sys
import time
from concurrent import futures

import grpc
from gstest import pb_varint as _varint  # this script's folder is on its path


def _field(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def encode(pods):
    out = b""
    for p in pods:
        dev = _field(1, "nvidia.com/gpu") + b"".join(_field(2, d) for d in p["devices"])
        ctr = _field(1, p["container"]) + _field(2, dev)
        out += _field(1, _field(1, p["name"]) + _field(2, p["namespace"]) + _field(3, ctr))
    return out


def main():
    sock, pods_file = sys.argv[1], sys.argv[2]
    calls = [0]

    def list_pods(request, context):
        calls[0] += 1
        with open(pods_file) as f:
            return encode(json.load(f))

    handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
        "List": grpc.unary_unary_rpc_method_handler(list_pods, request_deserializer=lambda b: b,
                                                    response_serializer=lambda b: b)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("unix:" + sock)
    server.start()
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
