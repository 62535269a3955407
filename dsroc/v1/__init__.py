"""Generated wire types of the site API (``proto/dsroc/v1/site.proto``); the maths modules of ``dsroc`` never import them.

Regenerate from the repository root after editing the .proto file::

    python -m grpc_tools.protoc -I proto --python_out=. --grpc_python_out=. --pyi_out=. proto/dsroc/v1/site.proto
"""
