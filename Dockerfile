# berth itself in a container, driving the host's Docker engine through its socket.
#
# Bind-mount sources are host paths, so berth's home must be at the SAME absolute path inside
# this container and on the host (docker-compose.yml does that; "berth doctor" checks it).
#
# Build after "make setup" (uses the host's npm install and build, so no registry is needed
# beyond the base image):   docker build --build-arg BASE=node:24-bookworm-slim -t berth .
ARG BASE=node:24-bookworm-slim
FROM ${BASE}
WORKDIR /opt/berth
COPY package.json package-lock.json ./
COPY node_modules ./node_modules
COPY dist ./dist
COPY bin ./bin
COPY images ./images
ENV BERTH_HOME=/srv/berth
ENTRYPOINT ["node", "/opt/berth/bin/berth.js"]
CMD ["demo"]
