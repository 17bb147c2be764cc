# whypending: the bot and CLI in one static binary.
#   docker build -t whypending .
#   docker run --rm -v ~/.kube:/home/nonroot/.kube:ro whypending why-pending -n shop web-7f9c
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/whypending ./cmd/whypending

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/whypending /usr/local/bin/whypending
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/whypending"]
CMD ["serve", "--config", "/etc/whypending/config.yaml"]
